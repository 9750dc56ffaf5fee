"""Roles from the real worker class names of the RL frameworks (where each name comes from is cited)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.core.actors.roles import (
    BUILTIN_CLASSES,
    DEFAULT_RULES,
    ROLES,
    load_role_rules,
    role_of,
    role_rules,
)


@pytest.mark.parametrize(
    ("class_name", "role"),
    [
        # verl: verl/workers/fsdp_workers.py, megatron_workers.py, verl/trainer/main_ppo.py
        ("ActorRolloutRefWorker", "hybrid"),
        ("AsyncActorRolloutRefWorker", "hybrid"),
        ("CriticWorker", "critic"),
        ("RewardModelWorker", "reward"),
        ("AsyncvLLMServer", "rollout"),
        ("TaskRunner", "driver"),
        # NeMo RL: nemo_rl/models/policy/dtensor_policy_worker*.py, megatron_policy_worker.py,
        # nemo_rl/models/generation/vllm/vllm_worker.py
        ("DTensorPolicyWorker", "policy"),
        ("DTensorPolicyWorkerV2", "policy"),
        ("MegatronPolicyWorker", "policy"),
        ("VllmGenerationWorker", "rollout"),
        ("MathEnvironment", "env"),
        # RLinf: rlinf/workers/actor/megatron_actor_worker.py, rollout/sglang/sglang_worker.py,
        # rollout/hf/huggingface_worker.py, env/env_worker.py
        ("MegatronActor", "policy"),
        ("SGLangWorker", "rollout"),
        ("AsyncSGLangWorker", "rollout"),
        ("MultiStepRolloutWorker", "rollout"),
        ("EnvWorker", "env"),
        # OpenRLHF: openrlhf/trainer/ray/ppo_actor.py, ppo_critic.py, launcher.py, vllm_engine.py
        ("ActorModelRayActor", "policy"),
        ("CriticModelRayActor", "critic"),
        ("ReferenceModelRayActor", "reference"),
        ("RewardModelRayActor", "reward"),
        ("LLMRayActor", "rollout"),
        # RLlib: rllib/env/single_agent_env_runner.py, multi_agent_env_runner.py, core/learner/
        ("SingleAgentEnvRunner", "env"),
        ("MultiAgentEnvRunner", "env"),
        ("Learner", "learner"),
        ("PPOTorchLearner", "learner"),
        ("MyCustomEnvRunner", "env"),
        # the demo: cockpit/demo/trainer.py
        ("RolloutWorker", "rollout"),
        ("PolicyTrainer", "policy"),
        ("ReferencePolicy", "reference"),
        ("Critic", "critic"),
        ("RewardModel", "reward"),
        ("JobSupervisor", "driver"),
    ],
)
def test_framework_classes(class_name: str, role: str) -> None:
    assert DEFAULT_RULES.role(class_name) == role


@pytest.mark.parametrize(
    ("class_name", "name", "role"),
    [
        # verl-project/verl @ 1dda039b: main_ppo.py (TaskRunnerV1, the default with `use_v1: true`), the
        # one-step and fully async recipes, the agent loop, the TensorRT-LLM server, rollout/replica.py
        ("TaskRunnerV1", "", "driver"),
        ("OneStepTaskRunner", "", "driver"),
        ("FullyAsyncTaskRunner", "", "driver"),
        ("AgentLoopWorker", "agent_loop_worker_0_3f2a", "rollout"),
        ("FullyAsyncAgentLoopWorker", "", "rollout"),
        ("TRTLLMHttpServer", "", "rollout"),
        ("CheckpointEngineWorker", "", "rollout"),
        # NVIDIA-NeMo/RL @ 7ea279ab: one policy worker class for several groups, named by their prefix
        # (reward_model_environment.py, distillation.py `name_prefix="teacher"`, megatron generation)
        ("DTensorPolicyWorker", "reward_model_policy-0-0", "reward"),
        ("DTensorPolicyWorkerV2", "teacher-0-1", "reference"),
        ("MegatronPolicyWorker", "megatron_generation-0-0", "rollout"),
        ("DTensorPolicyWorkerV2", "lm_policy-0-0", "policy"),
        ("SingleControllerActor", "", "driver"),  # algorithms/single_controller.py
        ("AsyncTrajectoryCollector", "", "rollout"),  # algorithms/async_utils/trajectory_collector.py
        ("RouterActor", "", "rollout"),  # models/generation/sglang/sglang_router.py
        ("HFVerifyWorker", "", "env"),  # environments/math_environment.py
        ("CodeJaccardVerifyWorker", "", "env"),  # environments/code_jaccard_environment.py
        ("CodeExecutionWorker", "", "env"),  # environments/code_environment.py
        ("NemoGym", "", "env"),  # environments/nemo_gym.py
        # RLinf @ a3816b59: the inference workers compute old and reference log-probs
        ("MegatronInference", "InferenceGroup:0", "reference"),
        ("FSDPInference", "", "reference"),
        ("ToolWorker", "", "env"),
        # OpenRLHF @ 3c3be623: trainer/ppo_trainer.py, the controller on a CPU
        ("PPOTrainer", "", "driver"),
    ],
)
def test_newer_framework_classes_and_the_names_of_shared_ones(class_name: str, name: str, role: str) -> None:
    """Found by reading the frameworks' sources (2026-11-29): the classes named no role or the wrong one."""
    assert DEFAULT_RULES.role(class_name, name) == role


def test_every_builtin_role_is_listed() -> None:
    assert set(BUILTIN_CLASSES.values()) <= set(ROLES)


def test_colocated_worker_dict_takes_its_role_from_the_name_when_the_name_says() -> None:
    # verl's create_colocated_worker_cls: class `WorkerDict`, Ray may report the qualified name.
    assert DEFAULT_RULES.role("WorkerDict", "a1B2c3WorkerDict_0:0") == "colocated"
    assert DEFAULT_RULES.role("create_colocated_worker_cls.<locals>.WorkerDict") == "colocated"
    assert DEFAULT_RULES.role("WorkerDict", "critic_0") == "critic"


def test_unknown_class_has_no_role() -> None:
    assert DEFAULT_RULES.role("Counter", "counter") is None
    assert role_of("Counter") == ""


def test_user_mappings_win_exact_then_globs() -> None:
    rules = role_rules({"Counter": "bookkeeping", "My*Sampler": "rollout", "CriticWorker": "value"})
    assert rules.role("Counter") == "bookkeeping"
    assert rules.role("MyFastSampler") == "rollout"
    assert rules.role("CriticWorker") == "value"
    assert rules.role("RewardModelWorker") == "reward"  # built-ins still apply
    assert DEFAULT_RULES.role("Counter") is None  # the defaults are untouched


def test_a_user_role_table_adds_classes_and_globs_over_the_built_ins(tmp_path: Path) -> None:
    table = tmp_path / "roles.yaml"
    table.write_text('MyRolloutEngine: rollout\n"*Judge*": Reward\nCritic: judge\n')
    rules, problem = load_role_rules(table)
    assert problem is None
    assert rules.role("MyRolloutEngine") == "rollout"
    assert rules.role("pkg.mod.LLMJudgeWorker") == "reward"  # a glob, lower-cased role
    assert rules.role("Critic") == "judge"  # the user's word wins over the built-in table
    assert rules.role("PolicyTrainer") == "policy"  # the built-ins still apply


@pytest.mark.parametrize(
    ("text", "line", "why"),
    [
        ("a: [b\n", 2, "not valid YAML"),  # the reader names where the stream ended
        ("- rollout\n", 1, "expected a mapping"),
        ("Good: rollout\nBad: [1, 2]\n", 2, "the role of 'Bad' must be a word"),
        ("Good: rollout\n'': policy\n", 2, "a class name or glob"),
        ('Fine: rollout\nEvil: "x\\u0007y"\n', 2, "the role of 'Evil' must be a word"),
    ],
)
def test_a_broken_role_table_is_one_line_and_the_built_ins_stay(
    tmp_path: Path, text: str, line: int, why: str
) -> None:
    table = tmp_path / "roles.yaml"
    table.write_text(text)
    rules, problem = load_role_rules(table)
    assert rules is DEFAULT_RULES
    assert problem is not None and "\n" not in problem
    assert problem.startswith(f"{table}:{line}:") and why in problem and "built-in roles used" in problem


def test_no_role_table_is_the_built_ins_without_a_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COCKPIT_ROLES", str(tmp_path / "absent.yaml"))
    assert load_role_rules() == (DEFAULT_RULES, None)


def test_the_config_s_roles_come_from_the_caller_and_the_table_wins_over_them(tmp_path: Path) -> None:
    table = tmp_path / "roles.yaml"
    table.write_text("Mine: reward\n")
    configured = {"Mine": "rollout", "Theirs": "critic"}
    rules, problem = load_role_rules(table, configured=configured)
    assert problem is None and rules.role("Mine") == "reward" and rules.role("Theirs") == "critic"
    rules, problem = load_role_rules(tmp_path / "absent.yaml", configured=configured)
    assert problem is None and rules.role("Mine") == "rollout"
    table.write_text("- not a mapping\n")
    rules, problem = load_role_rules(table, configured=configured)
    assert problem is not None and rules.role("Theirs") == "critic"  # a broken table leaves the config's
