"""A double-clicked project opens in SwiftWriter: the desktop file passes the file (%f) to the
command, which opens the app on it, and registers the `.swiftwriter` type that the
shared-mime-info file in packaging/ defines; where the freedesktop tools are installed, a real
project file is recognised as that type."""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from swiftwriter import cli
from swiftwriter.ui import app

PACKAGING = Path(__file__).resolve().parents[1] / "packaging"
APP_ID = "org.swiftwriter.SwiftWriter"
NS = {"m": "http://www.freedesktop.org/standards/shared-mime-info"}


def desktop_entry():
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(PACKAGING / f"{APP_ID}.desktop", encoding="utf-8")
    return parser["Desktop Entry"]


def mime_type() -> ET.Element:
    root = ET.parse(PACKAGING / f"{APP_ID}.mime.xml").getroot()
    (kind,) = root.findall("m:mime-type", NS)
    return kind


def test_the_desktop_file_registers_the_project_type():
    kind = mime_type()
    assert [g.get("pattern") for g in kind.findall("m:glob", NS)] == ["*.swiftwriter"]
    assert kind.find("m:sub-class-of", NS).get("type") == "application/vnd.sqlite3"
    types = [t for t in desktop_entry()["MimeType"].split(";") if t]
    assert types == [kind.get("type")]


def test_the_desktop_files_command_opens_the_clicked_project(tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr(app, "run_app", lambda **kw: opened.append(kw) or 0)
    project = tmp_path / "My Novel.swiftwriter"
    project.write_bytes(b"")
    command = shlex.split(desktop_entry()["Exec"])
    assert command[0] == "swiftwriter" and command.count("%f") == 1
    argv = [str(project) if part == "%f" else part for part in command[1:]]
    assert cli.main(argv) == 0
    assert opened == [{"model": None, "project": str(project)}]
    no_file = [part for part in command[1:] if part != "%f"]  # launched from the menu
    assert cli.main(no_file) == 0 and opened[-1]["project"] is None


@pytest.mark.skipif(
    not (shutil.which("update-mime-database") and shutil.which("gio"))
    or not Path("/usr/share/mime/packages/freedesktop.org.xml").is_file(),
    reason="shared-mime-info's update-mime-database or gio is not installed here",
)
def test_a_project_file_is_recognised_as_the_type(tmp_path):
    from swiftwriter.store import Project

    packages = tmp_path / "share" / "mime" / "packages"
    packages.mkdir(parents=True)
    shutil.copy("/usr/share/mime/packages/freedesktop.org.xml", packages)
    shutil.copy(PACKAGING / f"{APP_ID}.mime.xml", packages / f"{APP_ID}.xml")
    subprocess.run(["update-mime-database", str(packages.parent)], check=True)
    project = tmp_path / "Novel.swiftwriter"
    Project.create(project, title="Novel").close()
    share = str(tmp_path / "share")
    env = {**os.environ, "XDG_DATA_HOME": share, "XDG_DATA_DIRS": share}
    info = subprocess.run(
        ["gio", "info", "-a", "standard::content-type", str(project)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert f"standard::content-type: {mime_type().get('type')}" in info.stdout
