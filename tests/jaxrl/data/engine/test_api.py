"""The real engine as the build sees it: its split generator draws one split's tasks only."""

from __future__ import annotations

from jaxrl.data.engine.api import default_engine


def test_the_engines_split_generator_draws_only_rl_split_tasks_over_every_family_that_has_them():
    engine = default_engine()
    split_of = engine.splitter(None, None)
    generate = engine.split_generator(None, None, "rl")
    tasks = generate(7, 64, "cpu", engine.family_names())
    assert {split_of(task) for task in tasks} == {"rl"}
    assert len({task.task_id for task in tasks}) == 64
    assert len({task.family for task in tasks}) > 1
    assert [t.code for t in generate(7, 64, "cpu", engine.family_names())] == [t.code for t in tasks]


def test_a_family_list_given_for_a_split_changes_what_the_split_generator_draws():
    # A held-out single-op family reserves its operators: rl recipes using them are held out too.
    engine = default_engine()
    default = engine.split_generator(None, None, "rl")(3, 256, "cpu", engine.family_names())
    assert any("tanh" in task.ops for task in default)
    held = engine.splitter(["tanh"], None)
    tasks = engine.split_generator(["tanh"], None, "rl")(3, 256, "cpu", engine.family_names())
    assert {held(task) for task in tasks} == {"rl"} and not any("tanh" in task.ops for task in tasks)
