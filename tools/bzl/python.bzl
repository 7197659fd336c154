"""Python toolchain for the project's virtualenv (made by scripts/bootstrap.sh).

Bazel 4 would otherwise run tests with whatever `python3` is on PATH, which lacks the project's
dependencies. The venv path is absolute and differs per checkout, so a repository rule computes it:
$VENV when set (as for scripts/bootstrap.sh; relative to the workspace root), else `.venv` there.
"""

def _venv_python_impl(ctx):
    root = ctx.path(Label("//:WORKSPACE")).dirname
    venv = ctx.os.environ.get("VENV") or ".venv"
    if not venv.startswith("/"):
        venv = "%s/%s" % (root, venv)
    python = ctx.path("%s/bin/python" % venv)
    if not python.exists:
        fail("No Python interpreter at %s: run scripts/bootstrap.sh first (VENV=%s)" % (python, venv))
    if " " in str(python) or "\t" in str(python):
        fail("The virtualenv path %s contains whitespace, which a #! line cannot hold: set VENV" % python)
    ctx.file("BUILD", """\
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

py_runtime(
    name = "venv_python3",
    interpreter_path = "{python}",
    python_version = "PY3",
    stub_shebang = "#!{python}",
)

py_runtime_pair(
    name = "venv_runtimes",
    py3_runtime = ":venv_python3",
)

toolchain(
    name = "toolchain",
    toolchain = ":venv_runtimes",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
""".format(python = python))

venv_python = repository_rule(
    implementation = _venv_python_impl,
    environ = ["VENV"],
    local = True,
    doc = "Declares :toolchain, a Python 3 toolchain running the virtualenv's interpreter.",
)
