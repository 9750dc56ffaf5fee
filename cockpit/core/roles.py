"""Provides the RL role of a Ray actor (rollout, policy, reference, critic, reward, env) from its names.

The frameworks name their workers after what they do: verl `ActorRolloutRefWorker` and `CriticWorker`,
NeMo RL `VllmGenerationWorker` and `DTensorPolicyWorker`, RLinf `EnvWorker`, OpenRLHF `ReferenceModelActor`.
The first matching rule wins; an actor matching none has the role "".
"""

from __future__ import annotations

import re

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (role, re.compile(pattern, re.IGNORECASE))
    for role, pattern in (
        ("hybrid", r"actor_?rollout|hybrid"),
        ("rollout", r"rollout|vllm|sglang|generat|inference|llm_?engine|sampler"),
        ("reference", r"ref(erence)?(_?(policy|model|worker|actor)|$|_)"),
        ("critic", r"critic|value_?(model|worker)"),
        ("reward", r"reward|(^|_)rm(_|$)"),
        ("env", r"env(ironment)?_?(worker|actor)?$|(^|_)env(_|$)"),
        ("policy", r"policy|trainer|learner|actor_?worker|megatron|fsdp|dtensor|train"),
        ("driver", r"^JobSupervisor$"),
    )
)


def role_of(class_name: str, name: str = "") -> str:
    """The role of an actor from its class and its name ("" when neither says)."""
    for text in (class_name, name):
        if not text:
            continue
        for role, pattern in _RULES:
            if pattern.search(text):
                return role
    return ""
