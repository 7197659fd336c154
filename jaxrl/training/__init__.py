"""Training math and loops of the policy side.

rewards     sandbox verdicts -> R_correct, R_speedup and the usable mask (infrastructure failures out)
advantages  group-relative advantage estimators by name: grpo, drgrpo, rloo
hrd         plan/code token segments and per-token advantages (reward_mode hrd or uniform)
losses      PPO-clip policy loss, KL estimators k1/k2/k3, loss aggregation modes as (numerator, denominator)
"""
