"""The supported Ray range: versions read as the dashboard reports them, one warning line outside the
range (or for a version that cannot be read); the job fields and runtime_env forms that not every
supported version accepts, one failed pre-flight line each, naming the version that brings it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.core.cluster.versions import (
    NEWEST_TESTED,
    OLDEST_SUPPORTED,
    TESTED,
    Field,
    parse_version,
    range_warning,
    version_fields,
)
from cockpit.core.jobs.preflight import version_check


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.44.1", (2, 44, 1)),
        ("2.60.0", (2, 60, 0)),
        ("2.60.0rc1", (2, 60, 0)),
        ("3.0", (3, 0, 0)),
        (" 2.9.3+dev", (2, 9, 3)),
        ("unknown", None),
        ("", None),
        ("v2.44", None),
    ],
)
def test_parse_version(text: str, expected: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize("text", [*TESTED, "2.43.0", "2.52.1"])
def test_no_warning_inside_the_range(text: str) -> None:
    assert range_warning(text) == ""


def test_one_line_outside_the_range() -> None:
    old = range_warning("2.9.3")
    assert old == (
        "this cluster runs Ray 2.9.3, older than the oldest the cockpit supports (2.43): best effort; "
        "some views may be empty."
    )
    new = range_warning("3.1.0")
    assert new == (
        "this cluster runs Ray 3.1.0, newer than the newest the cockpit is tested with (2.60): best effort."
    )
    assert range_warning("nonsense").startswith("the cluster reports Ray version 'nonsense'")


def test_the_range_holds_the_tested_versions() -> None:
    assert all(OLDEST_SUPPORTED <= parse_version(v)[:2] <= NEWEST_TESTED for v in TESTED)  # type: ignore[index]


@given(st.text(max_size=40))
def test_any_version_text_gives_one_line_or_none(text: str) -> None:
    """Whatever the cluster reports (a newline, an escape), the warning is one line, or none."""
    warning = range_warning(text)
    assert "\n" not in warning and "\x1b" not in warning


# -- the fields each version accepts ---------------------------------------------------------------------

ENV_FORMS = [
    # (a request, the field named, the first Ray that takes it)
    ({"entrypoint_label_selector": {"zone": "a"}}, "entrypoint_label_selector", "2.54"),
    ({"runtime_env": {"_rocprof_sys": {"env": {}}}}, "runtime_env._rocprof_sys", "2.48"),
    (
        {"runtime_env": {"pip": {"packages": ["six"], "pip_install_options": ["--no-build-isolation"]}}},
        "runtime_env.pip.pip_install_options",
        "2.49",
    ),
    ({"runtime_env": {"conda": "/opt/envs/rl"}}, "runtime_env.conda as an environment directory", "2.45"),
    ({"runtime_env": {"py_modules": ["/shared/mods/reward"]}}, "runtime_env.py_modules as a path", "2.47"),
    ({"runtime_env": {"working_dir": "s3://b/code.tar.gz"}}, "runtime_env.working_dir as a .tar.gz", "2.56"),
    (
        {"runtime_env": {"py_modules": ["https://h/m.tgz"]}},
        "runtime_env.py_modules as a .tar.gz/.tgz",
        "2.56",
    ),
    ({"runtime_env": {"working_dir": "s3://b/code.tar.xz"}}, "runtime_env.working_dir as a .tar.xz", "2.60"),
    (
        {"runtime_env": {"working_dir": "local:///shared/code"}},
        "runtime_env.working_dir as a local://",
        "2.60",
    ),
]


@pytest.mark.parametrize(("request_", "name", "since"), ENV_FORMS)
def test_a_field_newer_than_the_cluster_is_one_failed_line(
    request_: dict[str, object], name: str, since: str
) -> None:
    major, minor = map(int, since.split("."))
    before = f"{major}.{minor - 1}.0"
    check = version_check(request_, before)
    assert check is not None and check.status == "fail" and check.name == "Ray version"
    assert check.detail.startswith(name) and "\n" not in check.detail
    assert check.detail.endswith(f"Ray {before} does not accept it (it came with Ray {since})")
    accepted = version_check(request_, f"{since}.0")
    assert accepted is not None and accepted.status == "ok" and f"Ray {since}.0 accepts" in accepted.detail


def test_a_field_a_newer_ray_dropped() -> None:
    wheel = {"runtime_env": {"working_dir": "https://h/code.whl"}}
    assert version_check(wheel, "2.59.0").status == "ok"  # type: ignore[union-attr]
    check = version_check(wheel, "2.60.0")
    assert check is not None and check.status == "fail"
    assert check.detail == (
        "runtime_env.working_dir as a .whl URI: Ray 2.60.0 no longer accepts it (the last was Ray 2.59)"
    )


def test_every_refused_field_is_named_and_the_first_is_pointed_at() -> None:
    request = {
        "entrypoint_label_selector": {"zone": "a"},
        "runtime_env": {"pip": {"packages": [], "pip_install_options": []}, "_rocprof_sys": {}},
    }
    check = version_check(request, "2.48.1")
    assert check is not None and check.status == "fail" and check.key == "entrypoint_label_selector"
    assert "_rocprof_sys" not in check.detail  # 2.48 has it
    assert check.detail.count("does not accept it") == 2


@pytest.mark.parametrize(
    "request_",
    [
        {"entrypoint": "python x.py"},
        {
            "entrypoint": "python x.py",
            "entrypoint_num_cpus": 1,
            "entrypoint_num_gpus": 1,
            "entrypoint_memory": 2**30,
            "entrypoint_resources": {"trainer": 1},
            "runtime_env": {
                "pip": {"packages": ["six"], "pip_check": False, "pip_version": "==24.0"},
                "uv": {"packages": ["six"], "uv_pip_install_options": ["--no-cache"]},
                "conda": "/opt/envs/rl.yaml",
                "py_executable": "/opt/venv/bin/python",
                "image_uri": "docker.io/rayproject/ray:2.43.0",
                "working_dir": "gcs://_ray_pkg_0123456789abcdef.zip",
                "py_modules": ["s3://b/mod.zip", "https://h/mod.whl"],
                "env_vars": {"A": "1"},
                "excludes": [".git"],
                "config": {"setup_timeout_seconds": 600},
                "_nsight": "default",
            },
        },
    ],
)
def test_what_every_supported_version_accepts_has_no_check(request_: dict[str, object]) -> None:
    assert version_fields(request_) == []
    assert version_check(request_, "2.43.0") is None


def test_an_unreadable_version_is_left_to_the_connect_warning() -> None:
    assert version_check({"entrypoint_label_selector": {"a": "b"}}, "unknown") is None


@given(
    st.recursive(st.none() | st.text() | st.integers(), lambda c: st.lists(c) | st.dictionaries(st.text(), c))
)
def test_any_request_shape_gives_a_list_never_an_error(value: object) -> None:
    for request in ({"runtime_env": value}, {"runtime_env": {"pip": value, "working_dir": value}}):
        assert all(isinstance(f, Field) for f in version_fields(request))
