"""Local stand-ins for the repositories Bazel 4 would otherwise download.

Debian's bazel-bootstrap has no network access here, yet its built-in WORKSPACE suffix declares
@rules_cc, @rules_java and @remote_coverage_tools as downloads that even a py_test needs (@bazel_tools
loads the first two while resolving toolchains; every test depends on the third). Declaring them
first (the suffix only adds repositories not yet defined) keeps every build offline.
"""

def _stub_repository_impl(ctx):
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    for label, path in ctx.attr.files.items():
        ctx.symlink(ctx.path(label), path)
    if "BUILD" not in ctx.attr.files.values():
        ctx.file("BUILD", "")

stub_repository = repository_rule(
    implementation = _stub_repository_impl,
    attrs = {"files": attr.label_keyed_string_dict(doc = "file in //tools/bzl/stubs -> path in the repository")},
    doc = "A repository assembled from files of //tools/bzl/stubs.",
)

def offline_repositories():
    stub_repository(
        name = "rules_cc",
        files = {
            "//tools/bzl/stubs:rules_cc.cc.BUILD": "cc/BUILD",
            "//tools/bzl/stubs:rules_cc.defs.bzl": "cc/defs.bzl",
        },
    )
    stub_repository(
        name = "rules_java",
        files = {
            "//tools/bzl/stubs:rules_java.defs.bzl": "java/defs.bzl",
            "//tools/bzl/stubs:empty.BUILD": "java/BUILD",
        },
    )
    stub_repository(
        name = "remote_coverage_tools",
        files = {
            "//tools/bzl/stubs:remote_coverage_tools.BUILD": "BUILD",
            "//tools/bzl/stubs:coverage_unavailable.sh": "coverage_unavailable.sh",
        },
    )
