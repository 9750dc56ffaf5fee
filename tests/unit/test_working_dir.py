"""The working_dir upload: `.git` always left out, `excludes`, `.gitignore` and `.rayignore` matched as Ray
2.60 matches them (Ray's own packaging code is the oracle), one file list for the zip and the pre-flight."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from cockpit.core.jobs import launch, profiles
from cockpit.core.jobs.preflight import preflight


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


CODE = {
    ".git/HEAD": "ref: refs/heads/main\n",
    ".git/objects/aa/bb": "x" * 100,
    "train.py": "print(1)\n",
    "conf/ppo.yaml": "a: 1\n",
    "ckpt/step1.ckpt": "w" * 50,
    "model.ckpt": "w" * 10,
    "data/raw/a.parquet": "d" * 20,
    "data/keep.txt": "k",
    "top.txt": "t",
    "sub/top.txt": "t",
    "build/out.o": "o",
    "sub/build/x.o": "o",
    "sub/.git": "gitdir: /elsewhere\n",  # a worktree's .git is a file
    "logs/run.log": "l",
    "logs/keep.log": "l",
    "sub/.gitignore": "*.tmp\n",
    "sub/a.tmp": "t",
    "a.tmp": "t",
    ".gitignore": "logs/*.log\n!logs/keep.log\n",
    ".rayignore": "conf/\n",
    "notes/.rayignore": "*\n",
    "notes/n.txt": "n",
}
EXCLUDES = ["*.ckpt", "data/raw", "/top.txt", "build/"]


def zipped_names(data: bytes) -> list[str]:
    return sorted(zipfile.ZipFile(io.BytesIO(data)).namelist())


def ray_names(path: Path, excludes: list[str], tmp_path: Path) -> list[str]:
    """What Ray 2.60's own packaging puts in the zip (the SDK's upload path), `.git` excluded as we do."""
    from ray._private.runtime_env.packaging import _zip_files

    out = tmp_path / "ray.zip"
    _zip_files(str(path), [*excludes, ".git"], str(out), include_gitignore=True)
    return sorted(name for name in zipfile.ZipFile(out).namelist() if not name.endswith("/"))


def test_excludes_do_not_bring_git_back(tmp_path: Path) -> None:
    code = tree(tmp_path / "code", {".git/HEAD": "ref\n", "train.py": "print(1)\n", "m.ckpt": "w"})
    path = tmp_path / "p.yaml"
    path.write_text(
        f"entrypoint: python3 train.py\nworking_dir: {code}\nruntime_env: {{excludes: ['*.ckpt']}}\n"
    )
    request = profiles.render(profiles.load(path))
    excludes = tuple(request["runtime_env"]["excludes"])
    assert zipped_names(launch.zip_directory(code, excludes)) == ["train.py"]


def test_files_are_picked_as_ray_picks_them(tmp_path: Path) -> None:
    code = tree(tmp_path / "code", CODE)
    ours = launch.zip_directory(code, tuple(EXCLUDES))
    names = [n for n in zipped_names(ours) if not n.endswith("/")]
    assert names == ray_names(code, EXCLUDES, tmp_path)
    # Spelled out, so a change in Ray shows here as well as in the comparison.
    assert names == [
        ".gitignore",
        ".rayignore",
        "a.tmp",
        "data/keep.txt",
        "logs/keep.log",
        "sub/.gitignore",
        "sub/top.txt",
        "train.py",
    ]


def test_the_check_reports_the_files_and_bytes_the_zip_holds(tmp_path: Path) -> None:
    code = tree(tmp_path / "code", CODE)
    path = tmp_path / "p.yaml"
    path.write_text(
        f"entrypoint: python3 train.py\nworking_dir: {code}\nruntime_env:\n  excludes: {EXCLUDES!r}\n"
    )
    profile = profiles.load(path)
    check = next(c for c in preflight(profile, (), None) if c.name == "working_dir upload")
    archive = zipfile.ZipFile(io.BytesIO(launch.zip_directory(code, tuple(EXCLUDES))))
    files = [i for i in archive.infolist() if not i.is_dir()]
    size = sum(i.file_size for i in files)
    assert check.status == "ok"
    assert f"{len(files)} files, {size} bytes" in check.detail and ".git left out" in check.detail


def test_a_symlink_is_never_followed_out_of_the_working_dir(tmp_path: Path) -> None:
    code = tree(tmp_path / "code", {"train.py": "print(1)\n"})
    secret = tree(tmp_path / "home", {".ssh/id_ed25519": "PRIVATE"})
    (code / "home").symlink_to(secret)
    (code / "key").symlink_to(secret / ".ssh" / "id_ed25519")
    assert zipped_names(launch.zip_directory(code)) == ["train.py"]


def test_upload_over_the_cap_is_refused_by_check_and_zip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cockpit.core.jobs import working_dir

    code = tree(tmp_path / "code", {"a.bin": "x" * 600, "b.bin": "x" * 600, ".git/big": "x" * 5000})
    monkeypatch.setattr(working_dir, "MAX_UPLOAD_BYTES", 1000)
    path = tmp_path / "p.yaml"
    path.write_text(f"entrypoint: python3 train.py\nworking_dir: {code}\n")
    check = next(c for c in preflight(profiles.load(path), (), None) if c.name == "working_dir upload")
    assert check.blocking and "over 0 MiB" not in check.detail and "1000 bytes" in check.detail
    with pytest.raises(working_dir.UploadError, match="the dashboard refuses"):
        launch.zip_directory(code)
    # .git does not count: without the two files it fits.
    for name in ("a.bin", "b.bin"):
        os.unlink(code / name)
    assert (
        next(c for c in preflight(profiles.load(path), (), None) if c.name == "working_dir upload").status
        == "ok"
    )


@pytest.mark.parametrize(
    ("excludes", "fragment"),
    [
        ("excludes: '*.ckpt'", ":3: runtime_env.excludes: must be a list"),
        ("excludes: [1]", ":3: runtime_env.excludes: item 1 must be a string"),
        ("excludes: ['!']", ":3: runtime_env.excludes: item 1 is not a pattern Ray reads"),
    ],
)
def test_bad_excludes_name_file_line_and_key(tmp_path: Path, excludes: str, fragment: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(f"entrypoint: x\nruntime_env:\n  {excludes}\n")
    with pytest.raises(profiles.ProfileError) as info:
        profiles.load(path)
    assert str(info.value).startswith(str(path)) and fragment in str(info.value), str(info.value)
