"""The names TRL and verl users type for our knobs, so that an unknown key is answered with what it maps to
("grpo.num_generations is TRL's name; here it is grpo.group_size") rather than with the nearest spelling
(which for `num_generations` is `num_iterations`: 8 update passes per rollout instead of 8 samples per task).

A name is matched on the end of the dotted key the user gave: `grpo.num_generations`, `num_generations` and
`actor_rollout_ref.rollout.n` all find their entry. Values are (framework, our key, note).
"""

from __future__ import annotations

TRL, VERL = "TRL", "verl"

FOREIGN_NAMES: dict[str, tuple[str, str, str]] = {
    # TRL (GRPOConfig, SFTConfig, TrainingArguments)
    "num_generations": (TRL, "grpo.group_size", ""),
    "max_completion_length": (TRL, "sampling.max_new_tokens", ""),
    "max_prompt_length": (TRL, "sampling.max_prompt_tokens", ""),
    "per_device_train_batch_size": (TRL, "grpo.tasks_per_step",
                                    " (TRL counts completions: a step here samples tasks_per_step x group_size; "
                                    "for sft it is sft.batch_size)"),
    "gradient_accumulation_steps": (TRL, "grpo.micro_batch_rows",
                                    " (here a step accumulates over micro-batches of micro_batch_rows rows; "
                                    "for sft: sft.micro_batch_rows)"),
    "learning_rate": (TRL, "optim.learning_rate", ""),
    "lr_scheduler_type": (TRL, "optim.decay", ""),
    "warmup_ratio": (TRL, "optim.warmup_ratio", ""),
    "weight_decay": (TRL, "optim.weight_decay", ""),
    "max_grad_norm": (TRL, "optim.max_grad_norm", ""),
    "adam_beta1": (TRL, "optim.b1", ""),
    "adam_beta2": (TRL, "optim.b2", ""),
    "adam_epsilon": (TRL, "optim.eps", ""),
    "beta": (TRL, "grpo.beta", ""),
    "epsilon": (TRL, "grpo.epsilon_low", " (and grpo.epsilon_high)"),
    "loss_type": (TRL, "grpo.loss_agg_mode", " (TRL's dr_grpo is grpo.advantage_estimator=drgrpo)"),
    "num_train_epochs": (TRL, "sft.epochs", ""),
    "max_seq_length": (TRL, "sft.max_seq_len", ""),
    "max_length": (TRL, "sft.max_seq_len", ""),
    "save_steps": (TRL, "checkpoint.every", ""),
    "save_total_limit": (TRL, "checkpoint.max_to_keep", ""),
    "logging_steps": (TRL, "grpo.log_every", " (for sft: sft.log_every)"),
    "output_dir": (TRL, "run.output_root", ""),
    "model_name_or_path": (TRL, "model.source", ""),
    # verl (ppo_trainer.yaml)
    "rollout.n": (VERL, "grpo.group_size", ""),
    "max_response_length": (VERL, "sampling.max_new_tokens", ""),
    "train_batch_size": (VERL, "grpo.tasks_per_step", ""),
    "ppo_mini_batch_size": (VERL, "grpo.tasks_per_step", " (one optimizer update per rollout per num_iterations)"),
    "ppo_micro_batch_size_per_gpu": (VERL, "grpo.micro_batch_rows", " (over the whole mesh here)"),
    "ppo_epochs": (VERL, "grpo.num_iterations", ""),
    "optim.lr": (VERL, "optim.learning_rate", ""),
    "clip_ratio": (VERL, "grpo.epsilon_low", " (and grpo.epsilon_high)"),
    "clip_ratio_low": (VERL, "grpo.epsilon_low", ""),
    "clip_ratio_high": (VERL, "grpo.epsilon_high", ""),
    "kl_loss_coef": (VERL, "grpo.beta", ""),
    "kl_loss_type": (VERL, "grpo.kl_estimator", " (verl's low_var_kl is k3)"),
    "use_kl_loss": (VERL, "grpo.beta", " (KL is on when grpo.beta > 0)"),
    "adv_estimator": (VERL, "grpo.advantage_estimator", ""),
    "norm_adv_by_std_in_grpo": (VERL, "grpo.scale_rewards", ""),
    "total_training_steps": (VERL, "grpo.max_steps", ""),
    "filter_groups.enable": (VERL, "grpo.dynamic_sampling", ""),
    "max_num_gen_batches": (VERL, "grpo.max_sampling_rounds", " (rollouts per step at most)"),
    "save_freq": (VERL, "checkpoint.every", ""),
    "default_local_dir": (VERL, "run.output_root", ""),
    "model.path": (VERL, "model.source", ""),
}


def foreign_hint(key: str) -> str | None:
    """'<key> is TRL's name; here it is <ours>' for an unknown dotted key that ends in a TRL or verl name, else None."""
    parts = key.split(".")
    for start in range(len(parts)):
        entry = FOREIGN_NAMES.get(".".join(parts[start:]))
        if entry is not None:
            framework, ours, note = entry
            return f"{key} is {framework}'s name; here it is {ours}{note}"
    return None
