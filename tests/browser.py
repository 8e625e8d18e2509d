"""The browser the page tests drive: Debian's Chromium (installed by scripts/ensure-chromium,
never a downloaded build), headless, with the flags this sandboxed, offline machine needs."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    """Chromium's path; a missing browser fails the test (CI installs it, so never skip)."""
    path = os.environ.get("MINI_N8N_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        pytest.fail(f"no Chromium at {path}: run scripts/ensure-chromium (make test does)")
    return path


def person(browser) -> str:
    """This Chromium's User-Agent as a person's, not a headless one: n8n (and we) ignore an
    approval click from a bot, and HeadlessChrome is one to isbot (api/bots.py)."""
    return (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
        f"Chrome/{browser.version} Safari/537.36"
    )
