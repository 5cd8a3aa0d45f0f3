"""Fixtures for the store tests: a fresh project in a temporary folder."""

from __future__ import annotations

import hashlib

import pytest
from swiftwriter.store import Project


@pytest.fixture
def project_path(tmp_path):
    return tmp_path / "Novel.swiftwriter"


@pytest.fixture
def project(project_path):
    proj = Project.create(project_path, title="My novel", author="A. Writer")
    yield proj
    proj.close()


def file_digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# The first released format, frozen here: later code must keep opening files made with it.
FORMAT_1_SQL = """
CREATE TABLE "meta" ("key" TEXT PRIMARY KEY, "value" TEXT NOT NULL);
CREATE TABLE "documents" ("id" INTEGER PRIMARY KEY,
   "parent_id" INTEGER REFERENCES "documents"("id"), "kind" TEXT NOT NULL,
   "title" TEXT NOT NULL, "text" TEXT NOT NULL DEFAULT '', "position" INTEGER NOT NULL,
   "created" TEXT, "modified" TEXT);
CREATE INDEX "idx_documents_parent_id_position" ON "documents" ("parent_id", "position");
CREATE TABLE "snapshots" ("id" INTEGER PRIMARY KEY,
   "doc_id" INTEGER NOT NULL REFERENCES "documents"("id"), "title" TEXT,
   "text" TEXT NOT NULL, "reason" TEXT, "created" TEXT NOT NULL);
CREATE INDEX "idx_snapshots_doc_id" ON "snapshots" ("doc_id");
CREATE TABLE "notes" ("id" INTEGER PRIMARY KEY, "title" TEXT NOT NULL,
   "text" TEXT NOT NULL DEFAULT '', "pinned" INTEGER NOT NULL DEFAULT 0,
   "position" INTEGER NOT NULL, "created" TEXT, "modified" TEXT);
"""
