"""The quickstart's methods: the rows of its results table, each a label source, a reward and who
trains together (`corl quickstart --methods`), and the `corl train` settings each one needs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Method:
    """A row of the results table: how labels/rewards are made and who trains together."""

    label_source: str
    reward: str = "agreement"
    together: bool = False  # True: the whole cohort in one run (Co-RL); False: each agent alone
    same_family: bool = False  # True: the cohort is seed-only copies of the first family
    grpo: tuple[tuple[str, object], ...] = ()  # grpo settings the method needs (confidence: unscaled advantages)
    votes_factor: int = 1  # cohort.votes_per_prompt = votes_factor x K (the update still trains on K)
    votes_match_cohort: bool = False  # votes_per_prompt = N x K, N = the cohort's size (what Co-RL's N agents draw)
    frozen: int | None = None  # the agent (in --families order) that samples and teaches but never trains

    def votes_per_prompt(self, k: int, cohort_size: int) -> int | None:
        """cohort.votes_per_prompt of this method's runs; None: vote on the K trained samples."""
        votes = k * self.votes_factor * (cohort_size if self.votes_match_cohort else 1)
        return votes if votes != k else None


# The controls (issue 27):
# - ttrl-matched: TTRL with the vote compute of the whole Co-RL cohort. Each agent alone votes over
#   N x K samples (as many as Co-RL's N agents draw together) and trains on the first K of them
#   (as many as each Co-RL agent trains on): a Co-RL gain over it is not just more samples per vote.
# - co-rl-frozen-a / -b: Co-RL with the first / the second family frozen (agents[].train: false):
#   the other learns from a fixed teacher. Both are run, not "the stronger one": which base is
#   stronger is itself a measurement (and may differ by seed); the two rows show for each agent
#   whether its Co-RL gain survives a teacher that does not learn back (as large as in Co-RL:
#   distillation from the peer explains it; smaller: the peers' co-evolution matters).
# - co-rl-votes: Co-RL whose labels are voted from V = 2K samples, trained on the first K.
METHODS: dict[str, Method | None] = {
    "base": None,  # no training
    "ttrl": Method("self"),
    "co-rl": Method("peer", together=True),
    "gt": Method("truth"),
    "rent": Method("self", reward="entropy"),
    "intuitor": Method("self", reward="self_certainty"),
    "co-rewarding-ii": Method("ema"),
    "co-rl-same-family": Method("peer", together=True, same_family=True),
    "random-label": Method("random", together=True),  # control: a teacher's answer drawn at random, not voted
    "co-rl-confidence": Method("peer", reward="confidence", together=True, grpo=(("scale_rewards", "none"),)),
    "co-rl-soft": Method("peer", reward="vote_share", together=True),
    "co-rl-pooled": Method("pooled", together=True),  # --agents 3 (or more)
    "ttrl-matched": Method("self", votes_match_cohort=True),
    "co-rl-frozen-a": Method("peer", together=True, frozen=0),
    "co-rl-frozen-b": Method("peer", together=True, frozen=1),
    "co-rl-votes": Method("peer", together=True, votes_factor=2),
}
DEFAULT_METHODS = ("base", "ttrl", "co-rl", "gt")
# Always run (the embedded default's claims rest on all four: a slow machine once dropped GT-Reward
# for the budget and with it the claim that RL moves the bases); the others only if predicted to fit it.
ESSENTIAL = ("base", "ttrl", "co-rl", "gt")
