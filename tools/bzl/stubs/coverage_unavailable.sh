#!/bin/sh
echo "bazel coverage is not available offline (tools/bzl/offline.bzl); use pytest for coverage" >&2
exit 1
