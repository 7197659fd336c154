"""Config loading: includes, overrides, type coercion, validation and suggestions."""

from __future__ import annotations

import dataclasses
import re
import textwrap

import pytest

from jaxrl.config import (
    Config,
    ConfigError,
    EvalSection,
    MeshSection,
    ModelSection,
    SamplingSection,
    SandboxSection,
    all_keys,
    dump_config,
    load_config,
)
from jaxrl.config.foreign_names import FOREIGN_NAMES


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_defaults_without_a_file():
    config = load_config()
    assert config == Config()
    assert config.sampling.num_samples == 1 and config.eval.levels == (1, 2) and config.sandbox.targets == ()


def test_named_config_resolves_under_configs():
    assert load_config("eval_cpu_tiny") == load_config("eval_cpu_tiny.yaml") == load_config("configs/eval_cpu_tiny.yaml")
    with pytest.raises(FileNotFoundError, match="no_such_config"):
        load_config("no_such_config")


def test_includes_merge_in_order_relative_to_the_file(tmp_path):
    write(tmp_path / "base.yaml", """
        sampling: {temperature: 0.2, top_k: 5}
        run: {name: from-base}
    """)
    write(tmp_path / "models/m.yaml", """
        model: {source: /models/m, dtype: bfloat16}
        sampling: {temperature: 0.4}
    """)
    run = write(tmp_path / "runs/run.yaml", """
        include: [../base.yaml, ../models/m.yaml]
        sampling: {top_p: 0.9}
    """)
    config = load_config(run)
    assert (config.model.source, config.model.dtype) == ("/models/m", "bfloat16")
    assert (config.sampling.temperature, config.sampling.top_k, config.sampling.top_p) == (0.4, 5, 0.9)
    assert config.run.name == "from-base"


def test_include_errors(tmp_path):
    write(tmp_path / "a.yaml", "include: b.yaml\n")
    write(tmp_path / "b.yaml", "include: a.yaml\n")
    with pytest.raises(ConfigError, match="include cycle"):
        load_config(tmp_path / "a.yaml")
    write(tmp_path / "c.yaml", "include: missing.yaml\n")
    with pytest.raises(ConfigError, match="included file not found"):
        load_config(tmp_path / "c.yaml")
    write(tmp_path / "d.yaml", "- just\n- a list\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(tmp_path / "d.yaml")
    write(tmp_path / "e.yaml", "sampling: {temperature: [\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(tmp_path / "e.yaml")


def test_overrides_are_typed_by_the_schema():
    config = load_config(
        "eval_default",
        [
            "sampling.temperature=0.7",
            "sampling.top_k=0",
            "sampling.stop=[</s>, '###']",
            "eval.levels=[1]",
            "eval.ids=3,19",
            "eval.cpu_sized=true",
            "sandbox.targets=host-a:50051,10.0.0.2:50052",
            "sandbox.timeout_s=60",
            "run.name=2024",
            "model.tokenizer=null",
        ],
    )
    assert config.sampling.temperature == 0.7 and config.sampling.top_k == 0
    assert config.sampling.stop == ("</s>", "###")
    assert config.eval.levels == (1,) and config.eval.ids == (3, 19) and config.eval.cpu_sized is True
    assert config.sandbox.targets == ("host-a:50051", "10.0.0.2:50052")
    assert config.sandbox.timeout_s == 60.0 and isinstance(config.sandbox.timeout_s, float)
    assert config.run.name == "2024"
    assert config.model.tokenizer is None
    assert load_config(None, ["sandbox.targets="]).sandbox.targets == ()


def test_later_overrides_win_and_the_file_is_untouched():
    config = load_config("eval_default", ["sampling.num_samples=4", "sampling.num_samples=12", "eval.k=[1,12]"])
    assert config.sampling.num_samples == 12
    assert load_config("eval_default").sampling.num_samples == 10


@pytest.mark.parametrize(
    "override, message",
    [
        ("sampling.temprature=1", "unknown config key 'sampling.temprature'; did you mean 'sampling.temperature'"),
        ("temperature=1", "unknown config key 'temperature'; did you mean 'sampling.temperature'"),
        ("sandbox.wrkers=2", "did you mean 'sandbox.workers'"),
        ("nonsense.key=1", "unknown config key 'nonsense'; valid keys here: model, mesh, sampling"),
        ("sampling.top_p=2", r"sampling: .*top_p must be in \(0, 1\], got 2.0"),
        ("sampling.temperature=hot", "sampling.temperature must be a number, got 'hot'"),
        ("sampling.num_samples=2.5", "sampling.num_samples must be an integer"),
        ("eval.cpu_sized=maybe", "eval.cpu_sized must be true or false"),
        ("eval.levels=[1, x]", r"eval.levels\[1\] must be an integer, got 'x'"),
        ("eval.levels=[]", "levels must be a non-empty list"),
        ("eval.per_family=0", "per_family must be >= 1 or null, got 0"),
        ("eval.k=[1,20]", r"eval.k \[1, 20\] asks for more than sampling.num_samples=10"),
        ("model.dtype=fp8", r"model.dtype must be one of \['float32', 'bfloat16', 'float16'\]"),
        ("sandbox.backend=tpu", "sandbox.backend must be one of"),
        ("sandbox.targets=localhost", "targets must be host:port, got 'localhost'"),
        ("mesh.fsdp=0", "fsdp must be a positive int or -1"),
        ("mesh.data=-1", "at most one axis may be -1"),
        ("run.name=a/b", "name must be a non-empty folder name"),
        ("sampling=3", "sampling must be a mapping of keys"),
        ("sampling.temperature.x=1", "sampling.temperature is not a section"),
        ("novalue", "override must look like section.key=value"),
        ("bad key=1", "override must look like section.key=value"),
    ],
)
def test_bad_overrides_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config("eval_default", [override])


def test_scientific_notation_is_a_number_in_files_and_overrides(tmp_path):
    path = write(tmp_path / "run.yaml", """
        optim: {learning_rate: 3e-3, eps: 1E-8}
        sandbox: {timeout_s: 2.5E+2}
    """)
    config = load_config(path, ["grpo.beta=1e-3"])
    assert (config.optim.learning_rate, config.optim.eps, config.sandbox.timeout_s) == (3e-3, 1e-8, 250.0)
    assert config.grpo.beta == 1e-3
    assert load_config(None, ["optim.learning_rate=3e-3"]).optim.learning_rate == 3e-3
    assert load_config(None, ["run.name=1e-5"]).run.name == "1e-5"  # a string field keeps the text


@pytest.mark.parametrize("text", ["e5", "1e", "1e-", "1e5x", "e-3"])
def test_text_that_only_looks_scientific_is_not_a_number(text):
    with pytest.raises(ConfigError, match=f"optim.learning_rate must be a number, got '{text}'"):
        load_config(None, [f"optim.learning_rate={text}"])


def test_dump_then_load_gives_the_same_config(tmp_path):
    config = load_config("eval_cpu_tiny", ["sampling.stop=[x, y]", "sandbox.targets=h:1", "run.name=1e-5"])
    dump_config(config, tmp_path / "resolved.yaml")
    assert load_config(tmp_path / "resolved.yaml") == config
    assert "include" not in (tmp_path / "resolved.yaml").read_text()


def test_sections_coerce_and_validate_when_built_in_code():
    sampling = SamplingSection(temperature="0.5", stop=["a"])
    assert sampling.temperature == 0.5 and sampling.stop == ("a",)
    with pytest.raises(ConfigError, match="temperature must be >= 0"):
        SamplingSection(temperature=-1)
    with pytest.raises(ConfigError, match="EvalSection.k must be a list"):
        EvalSection(k=3.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sampling.temperature = 1.0  # type: ignore[misc]
    replaced = dataclasses.replace(sampling, top_k="7")
    assert replaced.top_k == 7
    with pytest.raises(ConfigError, match="asks for more than"):
        Config(eval=EvalSection(k=(1, 4)), sampling=SamplingSection(num_samples=2))
    assert SandboxSection(targets=["[::1]:50051"]).targets == ("[::1]:50051",)


def test_schema_matches_the_model_and_mesh_code():
    """The config's choices are the ones jaxrl.models and jaxrl.sharding accept."""
    import typing

    from jaxrl.models import config as model_config
    from jaxrl.sharding import MeshConfig

    hints = typing.get_type_hints(ModelSection)
    assert typing.get_args(hints["dtype"]) == model_config.DTYPES
    assert typing.get_args(hints["attention_impl"]) == model_config.ATTENTION_IMPLS
    assert typing.get_args(hints["remat"]) == model_config.REMAT_POLICIES
    mesh = MeshSection(data=2, fsdp=-1, tensor=2)
    assert MeshConfig(**dataclasses.asdict(mesh)).resolve(8) == (2, 2, 2)
    assert dataclasses.asdict(MeshSection()) == dataclasses.asdict(MeshConfig())


@pytest.mark.parametrize(
    "override, message",
    [
        ("grpo.num_generations=8", "unknown config key 'grpo.num_generations': grpo.num_generations is TRL's name; "
                                   "here it is grpo.group_size"),
        ("grpo.max_completion_length=512", "grpo.max_completion_length is TRL's name; here it is sampling.max_new_tokens"),
        ("max_completion_length=512", "max_completion_length is TRL's name; here it is sampling.max_new_tokens"),
        ("sft.per_device_train_batch_size=4", "sft.per_device_train_batch_size is TRL's name; here it is "
                                              "grpo.tasks_per_step (TRL counts completions"),
        ("grpo.learning_rate=1e-6", "grpo.learning_rate is TRL's name; here it is optim.learning_rate"),
        ("optim.beta=0.04", "optim.beta is TRL's name; here it is grpo.beta"),
        ("actor_rollout_ref.rollout.n=8", "unknown config key 'actor_rollout_ref': actor_rollout_ref.rollout.n is "
                                          "verl's name; here it is grpo.group_size"),
        ("data.max_response_length=1024", "data.max_response_length is verl's name; here it is sampling.max_new_tokens"),
        ("actor_rollout_ref.actor.optim.lr=1e-6", "is verl's name; here it is optim.learning_rate"),
    ],
)
def test_trl_and_verl_names_say_what_they_map_to(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, [override])


def test_every_foreign_name_maps_to_a_real_key():
    keys = set(all_keys(Config))
    assert {ours for _, ours, _ in FOREIGN_NAMES.values()} <= keys
    ours_too = set(FOREIGN_NAMES) & {k.rsplit(".", 1)[-1] for k in keys}  # e.g. learning_rate in another section
    assert all(FOREIGN_NAMES[name][1].endswith("." + name) for name in ours_too)
