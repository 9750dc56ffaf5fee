"""Provides real shell completion runs: bash loading `cockpit completion bash` and calling the function it
registered (`complete -p cockpit`) exactly as bash does on TAB, fish's own `complete -C`, and a `cockpit`
on PATH that runs this checkout.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

BASH_DRIVER = r"""
eval "$(cockpit completion bash)" || exit 3
spec=$(complete -p cockpit) || exit 4
[[ $spec =~ -F\ ([^ ]+) ]] || exit 5
function=${BASH_REMATCH[1]}
COMP_LINE=$1
COMP_POINT=${#COMP_LINE}
COMP_TYPE=9
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
"$function" cockpit "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""
"""Registers the generated script, then does what bash does on TAB: set COMP_LINE, COMP_WORDS ... and
call the function `complete -F` named with the command, the word and the word before it."""


def checkout_cockpit(bin_dir: Path) -> Path:
    """A `cockpit` command in BIN_DIR that runs this checkout with the test's Python."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "cockpit"
    path.write_text(
        "#!/bin/sh\n"
        f"PYTHONPATH={shlex.quote(str(REPO))}${{PYTHONPATH:+:$PYTHONPATH}} "
        f'exec {shlex.quote(sys.executable)} -m cockpit "$@"\n'
    )
    path.chmod(0o755)
    return path


def bash_completions(line: str, env: Mapping[str, str], cwd: Path) -> list[str]:
    """What bash offers for LINE (the cursor at its end) with the generated script loaded (a single
    candidate comes with the space bash types after it; dropped here)."""
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", BASH_DRIVER, "bash", line],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"bash completion of {line!r} failed ({done.returncode}): {done.stderr}"
    return [word.rstrip(" ") for word in done.stdout.splitlines() if word]


def fish_completions(line: str, env: Mapping[str, str], cwd: Path) -> list[str]:
    """What fish offers for LINE with the generated script loaded (fish's `complete -C`; the candidates
    without their descriptions)."""
    script = f"cockpit completion fish | source; complete -C {shlex.quote(line)}"
    done = subprocess.run(
        ["fish", "--no-config", "-c", script],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"fish completion of {line!r} failed ({done.returncode}): {done.stderr}"
    return [word.split("\t")[0] for word in done.stdout.splitlines() if word]


def path_with(bin_dir: Path) -> str:
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
