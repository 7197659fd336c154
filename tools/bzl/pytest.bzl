"""One py_test per pytest file, so Bazel schedules, caches and reports each file on its own."""

_RUNNER = "//tools/bzl:pytest_main.py"

def pytest_suite(name, srcs, data = [], size = "large", tags = [], tags_by_src = {}, data_by_src = {}, **kwargs):
    """Declares a py_test `<file without .py>` for each file in srcs, and a test_suite `name` of them all.

    Args:
      name: name of the test_suite.
      srcs: pytest files of this package, e.g. glob(["tests/**/test_*.py"]).
      data: files every test may read (sources, configs, conftest.py, pyproject.toml ...).
      size: Bazel test size; "large" allows 15 minutes per file.
      tags: tags of every py_test.
      tags_by_src: more tags for some files: {path relative to the package: [tag, ...]}.
      data_by_src: more data for some files: {path relative to the package: [label, ...]}.
      **kwargs: passed to each py_test (timeout, ...).
    """
    unknown = [src for src in list(tags_by_src) + list(data_by_src) if src not in srcs]
    if unknown:
        fail("pytest_suite: tags_by_src or data_by_src name files that are not in srcs: %s" % unknown)
    package = native.package_name()
    tests = []
    for src in srcs:
        if not src.endswith(".py"):
            fail("pytest_suite: %s is not a .py file" % src)
        test = src[:-len(".py")]
        native.py_test(
            name = test,
            srcs = [_RUNNER, src],
            main = _RUNNER,
            # The runner starts at the workspace root of the runfiles tree.
            args = ["%s/%s" % (package, src) if package else src],
            data = data + data_by_src.get(src, []),
            size = size,
            python_version = "PY3",
            # Bazel would add empty __init__.py files, turning tests/ into packages pytest never sees.
            legacy_create_init = False,
            tags = sorted({t: None for t in tags + tags_by_src.get(src, [])}.keys()),
            **kwargs
        )
        tests.append(test)
    native.test_suite(name = name, tests = tests)
