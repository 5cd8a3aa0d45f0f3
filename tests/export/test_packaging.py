"""The packaging files agree with each other and with the app: one application id, an icon
that exists at the size desktops expect, a spec that is valid Python and bundles no model."""

from __future__ import annotations

import ast
import configparser
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
APP_ID = "org.swiftwriter.SwiftWriter"


def desktop_entry() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read(PACKAGING / f"{APP_ID}.desktop", encoding="utf-8")
    return parser["Desktop Entry"]


def test_desktop_file_names_the_command_and_icon():
    entry = desktop_entry()
    assert entry["Type"] == "Application"
    assert entry["Exec"].split()[0] == "swiftwriter"  # the console script pyproject installs
    assert entry["Icon"] == APP_ID
    assert "Office" in entry["Categories"].split(";")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'swiftwriter = "swiftwriter.cli:main"' in pyproject


def test_metainfo_matches_the_desktop_file():
    root = ET.parse(PACKAGING / f"{APP_ID}.metainfo.xml").getroot()
    assert root.tag == "component" and root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID
    assert root.find("launchable").text == f"{APP_ID}.desktop"
    assert root.findtext("project_license") == "Apache-2.0"
    assert root.findtext("name") == desktop_entry()["Name"]
    assert (
        root.find("releases/release").get("version")
        in (ROOT / "app/swiftwriter/__init__.py").read_text()
    )


def test_icon_svg_and_png():
    svg = ET.parse(ROOT / "resources" / "swiftwriter.svg").getroot()
    assert svg.tag.endswith("svg") and svg.get("viewBox") == "0 0 256 256"
    png = (ROOT / "resources" / "swiftwriter.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (256, 256)


def test_spec_is_python_and_bundles_no_converted_model():
    source = (PACKAGING / "swiftwriter.spec").read_text(encoding="utf-8")
    ast.parse(source)
    assert "launch.py" in source and (PACKAGING / "launch.py").is_file()
    assert "models_dir" not in source and "user_data_dir" not in source
    ast.parse((PACKAGING / "launch.py").read_text(encoding="utf-8"))


@pytest.mark.skipif(
    shutil.which("desktop-file-validate") is None, reason="desktop-file-utils absent"
)
def test_desktop_file_validates():
    subprocess.run(["desktop-file-validate", str(PACKAGING / f"{APP_ID}.desktop")], check=True)


@pytest.mark.skipif(shutil.which("appstreamcli") is None, reason="appstream absent")
def test_metainfo_validates():
    path = PACKAGING / f"{APP_ID}.metainfo.xml"
    result = subprocess.run(
        ["appstreamcli", "validate", "--no-net", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
