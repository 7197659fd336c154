"""Triton helpers that Inductor's kernels call through `torch._inductor.runtime.triton_helpers`.

A standalone module cannot import Inductor's runtime, so the converter writes the helpers a kernel uses
into the module itself, from this table: our own `@triton.jit` functions with the semantics torch gives
the operations (NaN-propagating min/max, first index on ties, Welford statistics, online softmax).
A kernel calling a helper that is not here cannot be converted, and the converter says which.
"""

from __future__ import annotations

PREFIX = "helper_"

# torch.minimum / torch.maximum: a NaN on either side wins.
_EXTREMUM = """
@triton.jit
def helper_{name}(a, b):
    pick_a = a {op} b
    if helper_is_floating(a):
        pick_a = pick_a | (a != a)
    return tl.where(pick_a, a, b)
"""
# The extremum of two (value, index) pairs as torch's argmin / argmax pick it: NaN first, the lower index on ties.
_EXTREMUM_WITH_INDEX = """
@triton.jit
def helper_{name}_with_index(a_value, a_index, b_value, b_index):
    # the {what} value (NaN first), the lower index among equals
    pick_a = a_value {op} b_value
    tie = a_value == b_value
    if helper_is_floating(a_value):
        a_nan = a_value != a_value
        b_nan = b_value != b_value
        pick_a = pick_a | (a_nan & (b_nan == 0))
        tie = tie | (a_nan & b_nan)
    pick_a = pick_a | (tie & (a_index < b_index))
    return tl.where(pick_a, a_value, b_value), tl.where(pick_a, a_index, b_index)
"""

# name -> (source, names of other helpers it calls)
_HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "promote_to_tensor": ("""
@triton.jit
def helper_promote_to_tensor(x):
    # a scalar becomes a one-element block; a block stays as it is
    return x + tl.zeros([1], tl.int1)
""", ()),
    "is_floating": ("""
@triton.jit
def helper_is_floating(x):
    return helper_promote_to_tensor(x).dtype.is_floating()
""", ("promote_to_tensor",)),
    "minimum": (_EXTREMUM.format(name="minimum", op="<"), ("is_floating",)),
    "maximum": (_EXTREMUM.format(name="maximum", op=">"), ("is_floating",)),
    "min2": ("""
@triton.jit
def helper_min2(a, dim):
    return tl.reduce(a, dim, helper_minimum)
""", ("minimum",)),
    "max2": ("""
@triton.jit
def helper_max2(a, dim):
    return tl.reduce(a, dim, helper_maximum)
""", ("maximum",)),
    "minimum_with_index": (_EXTREMUM_WITH_INDEX.format(name="minimum", op="<", what="smaller"), ("is_floating",)),
    "maximum_with_index": (_EXTREMUM_WITH_INDEX.format(name="maximum", op=">", what="larger"), ("is_floating",)),
    "min_with_index": ("""
@triton.jit
def helper_min_with_index(value, index, dim):
    return tl.reduce((value, index), dim, helper_minimum_with_index)
""", ("minimum_with_index",)),
    "max_with_index": ("""
@triton.jit
def helper_max_with_index(value, index, dim):
    return tl.reduce((value, index), dim, helper_maximum_with_index)
""", ("maximum_with_index",)),
    "any": ("""
@triton.jit
def helper_either(a, b):
    return a | b


@triton.jit
def helper_any(a, dim):
    return tl.reduce(a, dim, helper_either)
""", ()),
    "prod": ("""
@triton.jit
def helper_times(a, b):
    return a * b


@triton.jit
def helper_prod(values, axis):
    return tl.reduce(values, axis, helper_times)
""", ()),
    "div_floor_integer": ("""
@triton.jit
def helper_div_floor_integer(a, b):
    # Python's floor division for integers (Triton's // truncates toward zero)
    quotient = a // b
    remainder = a % b
    return tl.where((remainder != 0) & ((remainder < 0) != (b < 0)), quotient - 1, quotient)
""", ()),
    "remainder_integer": ("""
@triton.jit
def helper_remainder_integer(a, b):
    # Python's modulo for integers: the result takes the divisor's sign
    remainder = a % b
    return tl.where((remainder != 0) & ((remainder < 0) != (b < 0)), remainder + b, remainder)
""", ()),
    "exp": ("""
@triton.jit
def helper_exp(x, use_fast_math: tl.constexpr):
    return tl.exp(x)
""", ()),
    "welford_reduce": ("""
@triton.jit
def helper_welford_reduce(value, mean, m2, weight, first_iteration):
    # one more observation per lane: running mean, sum of squared deviations and count
    if first_iteration:
        new_weight = tl.full(weight.shape, 1, weight.dtype)
        new_mean = value
        new_m2 = tl.zeros_like(m2)
    else:
        delta = value - mean
        new_weight = weight + 1
        new_mean = mean + delta / new_weight
        new_m2 = m2 + delta * (value - new_mean)
    return new_mean, new_m2, new_weight
""", ()),
    "welford_combine": ("""
@triton.jit
def helper_welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
    # two partial statistics merged (Chan et al.); empty partials weigh nothing
    delta = mean_2 - mean_1
    weight = weight_1 + weight_2
    share_2 = tl.where(weight == 0.0, 0.0, weight_2 / weight)
    return mean_1 + delta * share_2, m2_1 + m2_2 + delta * delta * weight_1 * share_2, weight
""", ()),
    "welford": ("""
@triton.jit
def helper_welford(mean, m2, weight, dim):
    return tl.reduce((mean, m2, weight), dim, helper_welford_combine)
""", ("welford_combine",)),
    "online_softmax_reduce": ("""
@triton.jit
def helper_online_softmax_reduce(lane_max, lane_sum, dim, use_fast_math: tl.constexpr):
    # per-lane (max, sum of exp(x - max)) pairs merged along dim
    row_max = helper_max2(lane_max, dim)
    shift = tl.where(tl.expand_dims(row_max, dim) == float("-inf"), 0, lane_max - tl.expand_dims(row_max, dim))
    return row_max, tl.sum(lane_sum * tl.exp(shift), dim)
""", ("max2",)),
    "online_softmax_combine": ("""
@triton.jit
def helper_online_softmax_combine(acc_max, acc_sum, value, use_fast_math: tl.constexpr):
    # the running (max, sum of exp(x - max)) after one more value (whose own sum is exp(0) = 1)
    new_max = helper_maximum(acc_max, value)
    empty = new_max == float("-inf")
    acc_scale = tl.where(empty, 1.0, tl.exp(acc_max - new_max))
    value_scale = tl.where(empty, 1.0, tl.exp(value - new_max))
    return new_max, acc_sum * acc_scale + value_scale
""", ("maximum",)),
    "online_softmax_combine_with_sum": ("""
@triton.jit
def helper_online_softmax_combine_with_sum(max_1, sum_1, max_2, sum_2, use_fast_math: tl.constexpr):
    new_max = helper_maximum(max_1, max_2)
    empty = new_max == float("-inf")
    scale_1 = tl.where(empty, 1.0, tl.exp(max_1 - new_max))
    scale_2 = tl.where(empty, 1.0, tl.exp(max_2 - new_max))
    return new_max, sum_1 * scale_1 + sum_2 * scale_2
""", ("maximum",)),
    "select_one": ("""
@triton.jit
def helper_select_one(x, mask, dim, keep_dims=False):
    # the one element of x where mask holds, along dim (everything else contributes an exact zero)
    return tl.sum(tl.where(mask, x, 0), dim, keep_dims=keep_dims).to(x.dtype)
""", ()),
    "device_assert_then": ("""
@triton.jit
def helper_device_assert_then(cond, msg: tl.constexpr, r):
    tl.device_assert(cond, msg)
    return r
""", ()),
}

SUPPORTED = frozenset(_HELPERS)


def helper_sources(names: set[str]) -> str:
    """The source of the named helpers and of every helper they call, each defined before its callers."""
    ordered: list[str] = []

    def visit(name: str) -> None:
        if name in ordered:
            return
        for dependency in _HELPERS[name][1]:
            visit(dependency)
        ordered.append(name)

    for name in sorted(names):
        if name not in _HELPERS:
            raise KeyError(name)
        visit(name)
    return "\n".join(_HELPERS[name][0].strip() + "\n\n" for name in ordered).rstrip() + "\n"


# libdevice functions Inductor calls, as the Triton interpreter can run them (it has no libdevice): a `tl`
# function of the same meaning, or a helper written with `tl` alone. On a GPU the module keeps libdevice.
PORTABLE_LIBDEVICE = {
    "exp": "tl.exp", "exp2": "tl.exp2", "log": "tl.log", "log2": "tl.log2", "sqrt": "tl.sqrt", "rsqrt": "tl.rsqrt",
    "sin": "tl.sin", "cos": "tl.cos", "erf": "tl.erf", "floor": "tl.floor", "ceil": "tl.ceil", "abs": "tl.abs",
    "fabs": "tl.abs", "fma": "tl.fma",
}
_LIBDEVICE_HELPERS: dict[str, str] = {
    "tanh": """
@triton.jit
def helper_libdevice_tanh(x):
    return 2.0 * tl.sigmoid(2.0 * x) - 1.0
""",
    "log1p": """
@triton.jit
def helper_libdevice_log1p(x):
    return tl.log(1.0 + x)
""",
    "expm1": """
@triton.jit
def helper_libdevice_expm1(x):
    return tl.exp(x) - 1.0
""",
    "erfc": """
@triton.jit
def helper_libdevice_erfc(x):
    return 1.0 - tl.erf(x)
""",
    "tan": """
@triton.jit
def helper_libdevice_tan(x):
    return tl.sin(x) / tl.cos(x)
""",
    "sinh": """
@triton.jit
def helper_libdevice_sinh(x):
    return 0.5 * (tl.exp(x) - tl.exp(-x))
""",
    "cosh": """
@triton.jit
def helper_libdevice_cosh(x):
    return 0.5 * (tl.exp(x) + tl.exp(-x))
""",
    "isnan": """
@triton.jit
def helper_libdevice_isnan(x):
    return x != x
""",
    "isinf": """
@triton.jit
def helper_libdevice_isinf(x):
    return tl.abs(x) == float("inf")
""",
    "trunc": """
@triton.jit
def helper_libdevice_trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))
""",
    "nearbyint": """
@triton.jit
def helper_libdevice_nearbyint(x):
    # round half to even, as torch.round does
    low = tl.floor(x)
    fraction = x - low
    low_is_even = low * 0.5 == tl.floor(low * 0.5)
    return tl.where(fraction > 0.5, low + 1.0, tl.where(fraction < 0.5, low, tl.where(low_is_even, low, low + 1.0)))
""",
    "fmod": """
@triton.jit
def helper_libdevice_fmod(a, b):
    quotient = a / b
    return a - tl.where(quotient < 0, tl.ceil(quotient), tl.floor(quotient)) * b
""",
    "copysign": """
@triton.jit
def helper_libdevice_copysign(a, b):
    return tl.where(b < 0, -tl.abs(a), tl.abs(a))
""",
    "hypot": """
@triton.jit
def helper_libdevice_hypot(a, b):
    return tl.sqrt(a * a + b * b)
""",
    "signbit": """
@triton.jit
def helper_libdevice_signbit(x):
    # negative, -0.0 included (1 / -0.0 is -inf)
    return (x < 0) | ((x == 0) & (1.0 / x < 0))
""",
    "pow": """
@triton.jit
def helper_libdevice_pow(x, y):
    # x ** y through exp and log; a negative base needs an integral exponent (odd ones keep the sign)
    magnitude = tl.exp(y * tl.log(tl.abs(x)))
    integral = y == tl.floor(y)
    odd = integral & (y * 0.5 != tl.floor(y * 0.5))
    signed = tl.where(odd, -magnitude, magnitude)
    result = tl.where(x < 0, tl.where(integral, signed, float("nan")), magnitude)
    return tl.where(y == 0, 1.0, result)
""",
}
PORTABLE_LIBDEVICE_HELPERS = frozenset(_LIBDEVICE_HELPERS)


def libdevice_helper_sources(names: set[str]) -> str:
    """The portable versions of the named libdevice functions (see PORTABLE_LIBDEVICE)."""
    return "\n".join(_LIBDEVICE_HELPERS[name].strip() + "\n\n" for name in sorted(names)).rstrip() + "\n"
