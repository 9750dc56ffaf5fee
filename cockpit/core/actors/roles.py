"""Provides the RL role of a Ray actor (rollout, policy, reference, critic, reward, env, learner ...).

The frameworks name their workers after what they do. A built-in table maps the real class names of verl,
NeMo RL, RLinf, OpenRLHF, RLlib and the demo to a role; after it come patterns on the class name, then on
the actor's name (verl's colocated `WorkerDict` says nothing in its class, and the user's own names often
do). `role_rules(extra)` adds the user's own {class-or-glob: role} mappings, which win over the built-ins;
`load_role_rules(configured=...)` adds the config's `roles:` (passed by the caller) and `roles.yaml` of the
user's config directory over them (`config.role_table` reads and checks it). An actor no rule matches has
no role (None): the UI shows its class instead.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.core.config.role_table import MAX_KEY as MAX_KEY
from cockpit.core.config.role_table import MAX_ROLE as MAX_ROLE

ROLES = (
    "hybrid",
    "rollout",
    "policy",
    "reference",
    "critic",
    "reward",
    "env",
    "learner",
    "colocated",
    "driver",
)
"""Every role the built-in rules give, in the order a table sorts them."""

BUILTIN_CLASSES: Mapping[str, str] = {
    # verl: verl/workers/fsdp_workers.py and megatron_workers.py (ActorRolloutRefWorker,
    # AsyncActorRolloutRefWorker, CriticWorker, RewardModelWorker, RolloutWorker); the async rollout
    # servers in verl/workers/rollout/ (AsyncvLLMServer, AsyncSglangServer, vLLMHttpServer); the driver
    # actor in verl/trainer/main_ppo.py (TaskRunner); colocated roles in one actor of the class
    # `WorkerDict` (verl/single_controller/ray/base.py, create_colocated_worker_cls).
    "ActorRolloutRefWorker": "hybrid",
    "AsyncActorRolloutRefWorker": "hybrid",
    "CriticWorker": "critic",
    "RewardModelWorker": "reward",
    "AsyncvLLMServer": "rollout",
    "AsyncSglangServer": "rollout",
    "vLLMHttpServer": "rollout",
    "SGLangHttpServer": "rollout",
    "TaskRunner": "driver",
    "WorkerDict": "colocated",
    # verl, newer: main_ppo.py's TaskRunnerV1 (the default, `use_v1: true`), the one-step and fully async
    # recipes' OneStepTaskRunner and FullyAsyncTaskRunner (the "TaskRunner" pattern below covers them);
    # the agent loop's AgentLoopWorker and FullyAsyncAgentLoopWorker, the TensorRT-LLM server, and the
    # checkpoint engine's CheckpointEngineWorker (the rollout's, verl/workers/rollout/replica.py).
    "AgentLoopWorker": "rollout",
    "FullyAsyncAgentLoopWorker": "rollout",
    "TRTLLMHttpServer": "rollout",
    "CheckpointEngineWorker": "rollout",
    # NeMo RL: nemo_rl/models/policy/dtensor_policy_worker.py (DTensorPolicyWorker), _v2.py
    # (DTensorPolicyWorkerV2), megatron_policy_worker.py (MegatronPolicyWorker),
    # nemo_rl/models/generation/vllm/vllm_worker.py (VllmGenerationWorker, VllmAsyncGenerationWorker),
    # nemo_rl/environments/ (MathEnvironment, CodeEnvironment ...).
    "DTensorPolicyWorker": "policy",
    "DTensorPolicyWorkerV2": "policy",
    "MegatronPolicyWorker": "policy",
    "VllmGenerationWorker": "rollout",
    "VllmAsyncGenerationWorker": "rollout",
    "MathEnvironment": "env",
    "CodeEnvironment": "env",
    # NeMo RL, newer: algorithms/single_controller.py (SingleControllerActor, the driver of
    # run_grpo_single_controller.py), async_utils/trajectory_collector.py (AsyncTrajectoryCollector),
    # the SGLang router (RouterActor), the environments' workers (math_environment.py HFVerifyWorker and
    # the other *VerifyWorker: the "VerifyWorker$" pattern), code_environment.py (CodeExecutionWorker),
    # nemo_gym.py (NemoGym). One policy worker class serves several groups: the reward model
    # (`reward_model_policy-...`), the distillation teacher (`teacher-...`), Megatron generation
    # (`megatron_generation-...`): its name says which (the classes are among `_VAGUE_CLASSES`).
    "SingleControllerActor": "driver",
    "AsyncTrajectoryCollector": "rollout",
    "RouterActor": "rollout",
    "CodeExecutionWorker": "env",
    "NemoGym": "env",
    # RLinf: rlinf/workers/actor/megatron_actor_worker.py (MegatronActor), fsdp_actor_worker.py
    # (FSDPActor), rlinf/workers/rollout/sglang/sglang_worker.py (SGLangWorker, AsyncSGLangWorker),
    # rollout/hf/huggingface_worker.py (MultiStepRolloutWorker), rlinf/workers/env/env_worker.py (EnvWorker).
    "MegatronActor": "policy",
    "FSDPActor": "policy",
    "SGLangWorker": "rollout",
    "AsyncSGLangWorker": "rollout",
    "VLLMWorker": "rollout",
    "MultiStepRolloutWorker": "rollout",
    "EnvWorker": "env",
    # RLinf, newer: rlinf/workers/inference/ (MegatronInference, FSDPInference: the old and reference
    # log-probs, not generation), rlinf/workers/agent/ (AgentLoopWorker above, ToolWorker).
    "MegatronInference": "reference",
    "FSDPInference": "reference",
    "ToolWorker": "env",
    # OpenRLHF: openrlhf/trainer/ray/ppo_actor.py (ActorModelRayActor), ppo_critic.py
    # (CriticModelRayActor), launcher.py (ReferenceModelRayActor, RewardModelRayActor),
    # vllm_engine.py / vllm_engine_async.py (LLMRayActor, LLMRayActorAsync).
    "ActorModelRayActor": "policy",
    "PolicyModelActor": "policy",
    "CriticModelRayActor": "critic",
    "ReferenceModelRayActor": "reference",
    "RewardModelRayActor": "reward",
    "LLMRayActor": "rollout",
    "LLMRayActorAsync": "rollout",
    "PPOTrainer": "driver",  # OpenRLHF's controller (trainer/ppo_trainer.py), on a CPU: not a policy
    # RLlib: rllib/env/env_runner.py (EnvRunner), single_agent_env_runner.py (SingleAgentEnvRunner),
    # multi_agent_env_runner.py (MultiAgentEnvRunner), rllib/core/learner/learner.py (Learner and the
    # framework learners, e.g. PPOTorchLearner: the "Learner$" pattern below).
    "EnvRunner": "env",
    "SingleAgentEnvRunner": "env",
    "MultiAgentEnvRunner": "env",
    "Learner": "learner",
    "TorchLearner": "learner",
    # The demo: cockpit/demo/trainer.py.
    "RolloutWorker": "rollout",
    "PolicyTrainer": "policy",
    "ReferencePolicy": "reference",
    "Critic": "critic",
    "RewardModel": "reward",
    # Ray's own job driver actor.
    "JobSupervisor": "driver",
}
"""Exact class names (the last dotted part of what Ray reports) to roles."""

BUILTIN_PATTERNS: tuple[tuple[str, str], ...] = (
    ("driver", r"TaskRunner"),
    ("env", r"VerifyWorker$"),
    ("hybrid", r"actor_?rollout|hybrid"),
    ("learner", r"Learner$"),
    ("env", r"EnvRunner$|Environment$"),
    ("rollout", r"rollout|vllm|sglang|generat|inference|llm_?engine|sampler"),
    ("reference", r"ref(erence)?(_?(policy|model|worker|actor)|$|_)|teacher"),
    ("critic", r"critic|value_?(model|worker)"),
    ("reward", r"reward|(^|_)rm(_|$)"),
    ("env", r"env(ironment)?_?(worker|actor)?$|(^|_)env(_|$)"),
    ("policy", r"policy|trainer|learner|actor_?worker|megatron|fsdp|dtensor|train"),
)
"""Documented naming habits, tried in order on the class name and then on the actor's name."""

_VAGUE_CLASSES = frozenset(
    {"WorkerDict", "DTensorPolicyWorker", "DTensorPolicyWorkerV2", "MegatronPolicyWorker"}
)
"""Classes that hold several roles at once: the actor's name may still say which (e.g. `critic_0`)."""


def _last_part(class_name: str) -> str:
    """`create_colocated_worker_cls.<locals>.WorkerDict` -> `WorkerDict`."""
    return class_name.rsplit(".", 1)[-1]


def _is_glob(key: str) -> bool:
    return any(ch in key for ch in "*?[")


@dataclass(frozen=True, slots=True)
class RoleRules:
    """Class names and patterns to roles: the user's first, then the built-in table and patterns."""

    user_exact: Mapping[str, str] = field(default_factory=dict)
    user_globs: tuple[tuple[str, str], ...] = ()
    exact: Mapping[str, str] = field(default_factory=lambda: dict(BUILTIN_CLASSES))
    patterns: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
        (role, re.compile(p, re.IGNORECASE)) for role, p in BUILTIN_PATTERNS
    )

    def role(self, class_name: str, name: str = "") -> str | None:
        """The role of an actor from its class and name, or None when nothing says."""
        short = _last_part(class_name)
        mine = self.user_exact.get(short)
        if mine:
            return mine
        for glob, role in self.user_globs:
            if fnmatch.fnmatchcase(short, glob) or fnmatch.fnmatchcase(class_name, glob):
                return role
        exact = self.exact.get(short)
        if exact and short not in _VAGUE_CLASSES:
            return exact
        for text in (name,) if exact else (short, name):
            if not text:
                continue
            for role, pattern in self.patterns:
                if pattern.search(text):
                    return role
        return exact


def role_rules(extra: Mapping[str, str] | None = None) -> RoleRules:
    """The built-in rules with EXTRA on top: {exact class name or glob (`*Rollout*`): role}.

    The user's exact names win, then their globs in the order given, then the built-in table and
    patterns. Roles are free text (a user may name their own).
    """
    exact: dict[str, str] = {}
    globs: list[tuple[str, str]] = []
    for key, role in (extra or {}).items():
        if _is_glob(key):
            globs.append((key, role))
        else:
            exact[_last_part(key)] = role
    return RoleRules(user_exact=exact, user_globs=tuple(globs))


DEFAULT_RULES = role_rules()


def role_of(class_name: str, name: str = "") -> str:
    """The role of an actor from its class and its name ("" when neither says), with the built-in rules."""
    return DEFAULT_RULES.role(class_name, name) or ""


ROLES_ENV = "COCKPIT_ROLES"


def user_roles_path() -> Path:
    """Where the user's role additions are: $COCKPIT_ROLES, else `ray-cockpit/roles.yaml` in the config
    directory ($XDG_CONFIG_HOME or ~/.config)."""
    chosen = os.environ.get(ROLES_ENV)
    if chosen:
        return Path(chosen).expanduser()
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "ray-cockpit" / "roles.yaml"


def load_role_rules(
    path: Path | None = None, configured: Mapping[str, str] | None = None
) -> tuple[RoleRules, str | None]:
    """The built-in rules plus CONFIGURED (the config's `roles:`, which the caller passes) and the user's
    mappings from PATH (default `user_roles_path()`; they win over the config's): a YAML mapping of exact
    class name or glob to role, e.g. `MyRolloutEngine: rollout` or `"*Judge*": reward`.

    Never raises: no file gives the built-ins (and CONFIGURED); a file that cannot be used gives those
    and one line "FILE:LINE: why" to show (a role table is a convenience, never a reason not to start).
    """
    from cockpit.core.config.role_table import RolesError, read_role_table

    configured = dict(configured or {})
    base = role_rules(configured) if configured else DEFAULT_RULES
    path = path or user_roles_path()
    if not path.exists():
        return base, None
    try:
        table = read_role_table(path)
    except RolesError as exc:
        return base, f"{str(exc).rstrip('.')} (role table ignored: built-in roles used)"
    if not table.roles:
        return base, None
    return role_rules({**configured, **table.roles}), None
