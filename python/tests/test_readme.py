"""Every code block of README.md runs as written.

The blocks run in document order in one empty folder, as a newcomer would
paste them: ``sh`` blocks with bash (``set -e``, the virtual environment's
``bin`` first on PATH, so ``memfit`` is the package's console command and
``python3`` has memfit), ``python`` blocks saved as a script and run with
this interpreter (so a block that starts worker processes needs its
``if __name__ == "__main__":`` guard, as it would for a user). Blocks
without a language (outputs shown in the text) are not code.

The lines that build and install memfit are what made this test's
environment, so they are not run again: ``cargo install``, ``pip install``
and ``bash scripts/test.sh`` (this run is part of it). ``cargo run
--release --bin memfit --`` runs the binary that cargo built
(``$MEMFIT_BIN``, else ``target/release/memfit``) with the same arguments.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
BIN = Path(os.environ.get("MEMFIT_BIN", REPO / "target" / "release" / "memfit"))
SETUP = re.compile(r"^\s*(cargo install|pip install|bash scripts/test\.sh)\b")
CARGO_RUN = "cargo run --release --bin memfit --"


def blocks():
    """(language, first line number, text) of each fenced block of README.md."""
    out, lang, start, body = [], None, 0, []
    for n, line in enumerate(README.read_text().splitlines(), 1):
        if line.startswith("```"):
            if lang is None:
                lang, start, body = line[3:].strip(), n + 1, []
            else:
                out.append((lang, start, "\n".join(body) + "\n"))
                lang = None
        elif lang is not None:
            body.append(line)
    assert lang is None, "README.md has an unclosed code block"
    return out


def shell_script(text):
    """The block as bash runs it here: setup lines dropped, `cargo run` as the built binary."""
    lines = []
    for line in text.splitlines():
        if SETUP.match(line):
            continue
        lines.append(line.replace(CARGO_RUN, str(BIN)))
    return "\n".join(lines) + "\n"


def test_readme_blocks_have_languages():
    """Each block is sh or python code, or output (no language)."""
    langs = {lang for lang, _, _ in blocks()}
    assert langs <= {"sh", "python", ""}, langs


def test_every_readme_block_runs(tmp_path):
    if not BIN.is_file():
        pytest.fail(f"memfit binary not found at {BIN}: build it with `cargo build --release --bin memfit`")
    if shutil.which("memfit", path=str(Path(sys.executable).parent)) is None:
        pytest.fail(f"no memfit console command beside {sys.executable}: install the package with pip")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    ran = 0
    for lang, line, text in blocks():
        if lang == "sh":
            cmd = ["bash", "-e", "-c", shell_script(text)]
        elif lang == "python":
            script = tmp_path / f"readme_block_{line}.py"
            script.write_text(text)
            cmd = [sys.executable, str(script)]
        else:
            continue
        # Its own session, so that background jobs a block starts end with it.
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=600)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert proc.returncode == 0, f"README.md block at line {line} ({lang}) exited {proc.returncode}:\n{out[-4000:]}"
        ran += 1
    assert ran >= 10, ran
