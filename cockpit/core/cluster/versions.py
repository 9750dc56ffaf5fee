"""Provides what the cockpit knows of Ray versions: the range it supports.

The cockpit speaks to the dashboard's REST API, which changes little between releases; where it does
change, the client reads both shapes (see the README's "Ray versions" table). A cluster outside the
supported range gets one warning line, then best effort.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

OLDEST_SUPPORTED = (2, 43)
"""The oldest Ray supported: the generation NeMo RL pins (2.43.0)."""
NEWEST_TESTED = (2, 60)
"""The newest Ray the whole suite runs against."""
TESTED = ("2.43.0", "2.44.1", "2.47.1", "2.60.0")
"""The versions the test suite starts real heads of."""

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """`2.44.1` -> (2, 44, 1); `2.60.0rc1`, `2.9.3+dev` read their numbers; None for anything else."""
    found = _VERSION.match(text or "")
    if not found:
        return None
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


def shown(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def range_warning(text: str) -> str:
    """One line when the cluster's Ray is outside the supported range (or unreadable); else ""."""
    version = parse_version(text)
    if version is None:
        return f"the cluster reports Ray version {text!r}, which the cockpit cannot read: best effort."
    if version[:2] < OLDEST_SUPPORTED:
        return (
            f"this cluster runs Ray {text}, older than the oldest the cockpit supports "
            f"({shown(OLDEST_SUPPORTED)}): best effort; some views may be empty."
        )
    if version[:2] > NEWEST_TESTED:
        return (
            f"this cluster runs Ray {text}, newer than the newest the cockpit is tested with "
            f"({shown(NEWEST_TESTED)}): best effort."
        )
    return ""


@dataclass(frozen=True)
class Field:
    """A job-submission field, or a form of a runtime_env field, that not every supported Ray accepts."""

    name: str
    """How the pre-flight names it, e.g. `runtime_env.pip.pip_install_options`."""
    since: tuple[int, int] = OLDEST_SUPPORTED
    """The first Ray that accepts it."""
    until: tuple[int, int] | None = None
    """The last Ray that accepts it (None: every one since)."""

    def refused_by(self, version: tuple[int, int, int]) -> str:
        """One line when Ray VERSION does not accept it; "" when it does."""
        shown_version = ".".join(map(str, version))
        if version[:2] < self.since:
            return (
                f"{self.name}: Ray {shown_version} does not accept it (it came with Ray {shown(self.since)})"
            )
        if self.until is not None and version[:2] > self.until:
            last = shown(self.until)
            return f"{self.name}: Ray {shown_version} no longer accepts it (the last was Ray {last})"
        return ""


# Read in each release's own source (ray/dashboard/modules/job/common.py JobSubmitRequest,
# ray/runtime_env/runtime_env.py RuntimeEnv.known_fields, ray/_private/runtime_env/validation.py).
LABEL_SELECTOR = Field("entrypoint_label_selector", since=(2, 54))
ROCPROF = Field("runtime_env._rocprof_sys", since=(2, 48))
PIP_INSTALL_OPTIONS = Field("runtime_env.pip.pip_install_options", since=(2, 49))
CONDA_DIRECTORY = Field("runtime_env.conda as an environment directory", since=(2, 45))
PY_MODULES_PATH = Field("runtime_env.py_modules as a path on the cluster", since=(2, 47))
LOCAL_URI = {
    key: Field(f"runtime_env.{key} as a local:// URI", since=(2, 60)) for key in ("working_dir", "py_modules")
}
TAR_GZ_URI = {
    key: Field(f"runtime_env.{key} as a .tar.gz/.tgz URI", since=(2, 56))
    for key in ("working_dir", "py_modules")
}
TAR_XZ_URI = {
    key: Field(f"runtime_env.{key} as a .tar.xz URI", since=(2, 60)) for key in ("working_dir", "py_modules")
}
WHEEL_WORKING_DIR = Field("runtime_env.working_dir as a .whl URI", until=(2, 59))
"""Every job-submission field and runtime_env key the cockpit sends that Ray 2.43 to 2.60 do not all
accept. Everything else the profiles can say is accepted by all of them: entrypoint_num_cpus,
entrypoint_num_gpus, entrypoint_memory, entrypoint_resources; runtime_env pip (list, file, dict with
packages/pip_check/pip_version), uv (with uv_check, uv_version, uv_pip_install_options), conda (name,
YAML, dict), py_executable, image_uri, container, env_vars, working_dir and py_modules as .zip URIs,
excludes, config, worker_process_setup_hook, java_jars, _nsight."""


def _uri_forms(key: str, value: Any) -> Iterator[Field]:
    for item in value if isinstance(value, list) else [value]:
        if not isinstance(item, str):
            continue
        lowered = item.lower().split("?", 1)[0]
        if lowered.startswith("local://"):
            yield LOCAL_URI[key]
        elif "://" not in item:
            if key == "py_modules":
                yield PY_MODULES_PATH
        elif lowered.endswith((".tar.gz", ".tgz")):
            yield TAR_GZ_URI[key]
        elif lowered.endswith(".tar.xz"):
            yield TAR_XZ_URI[key]
        elif key == "working_dir" and lowered.endswith(".whl"):
            yield WHEEL_WORKING_DIR


def version_fields(request: Mapping[str, Any]) -> list[Field]:
    """The fields of a JobSubmitRequest (as the cockpit sends it) that depend on the cluster's Ray."""
    found: list[Field] = []
    if request.get("entrypoint_label_selector"):
        found.append(LABEL_SELECTOR)
    env = request.get("runtime_env")
    if not isinstance(env, Mapping):
        return found
    if "_rocprof_sys" in env:
        found.append(ROCPROF)
    pip = env.get("pip")
    if isinstance(pip, Mapping) and "pip_install_options" in pip:
        found.append(PIP_INSTALL_OPTIONS)
    conda = env.get("conda")
    if isinstance(conda, str) and conda.startswith("/") and not conda.endswith((".yaml", ".yml")):
        found.append(CONDA_DIRECTORY)
    for key in ("working_dir", "py_modules"):
        if key in env:
            found.extend(_uri_forms(key, env[key]))
    return list(dict.fromkeys(found))
