"""One py_test per pytest file, so Bazel schedules, caches and reports each file on its own."""

_RUNNER = "//tools/bzl:pytest_main.py"

def pytest_suite(name, srcs, data = [], size = "large", **kwargs):
    """Declares a py_test `<file without .py>` for each file in srcs, and a test_suite `name` of them all.

    Args:
      name: name of the test_suite.
      srcs: pytest files of this package, e.g. glob(["tests/**/test_*.py"]).
      data: files every test may read (sources, configs, conftest.py, pyproject.toml ...).
      size: Bazel test size; "large" allows 15 minutes per file.
      **kwargs: passed to each py_test (tags, timeout, ...).
    """
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
            data = data,
            size = size,
            python_version = "PY3",
            # Bazel would add empty __init__.py files, turning tests/ into packages pytest never sees.
            legacy_create_init = False,
            **kwargs
        )
        tests.append(test)
    native.test_suite(name = name, tests = tests)
