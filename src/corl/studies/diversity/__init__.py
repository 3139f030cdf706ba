"""Error decoupling before training: do two candidate partners err differently?

    corl diversity --models A B C --data math500/test.jsonl --n 500 --anchor A

Co-RL helps when the peer that labels an agent's prompts is wrong on *other* problems
than the agent itself (paper, Appendix A, Tables 6-7): before any RL, cross-family pairs
measured Cohen's kappa <= 0.42 and complementarity c >= 29.4%, same-family and seed-only
pairs kappa >= 0.51 and c <= 24.6%, and the downstream gains followed the same order.
This module measures that for the price of one sampled answer per problem and model.

Two halves:
- pure metrics on correctness vectors (`contingency`, `cohens_kappa`, `complementarity`,
  `oracle_accuracy`, `wrong_agreement`, `pearson`, `rank_partners`), checked by hand in
  tests/studies/test_diversity.py;
- the study runner (`run_study`): select problems, sample each model once (cached on
  disk per model and settings), grade, and compare every pair.
"""

from corl.studies.diversity.cohort import agents_yaml, recommend_cohort, score_cohort
from corl.studies.diversity.metrics import (
    Contingency,
    PairStats,
    cohens_kappa,
    complementarity,
    contingency,
    kappa_standard_error,
    oracle_accuracy,
    pair_stats,
    pearson,
    rank_partners,
    wrong_agreement,
)
from corl.studies.diversity.study import (
    CACHE_VERSION,
    PAPER_REFERENCE,
    SEED_TWIN_OFFSET,
    SUBSET_SEED,
    WEAK_PARTNER_RATIO,
    ProgressFn,
    Sample,
    StudyResult,
    StudySettings,
    build_report,
    cache_key,
    cache_path,
    collect_samples,
    compare_samples,
    generate_texts,
    model_identity,
    parse_filter,
    plot_kappa_heatmap,
    recommend,
    run_study,
    select_problems,
)

__all__ = [
    "agents_yaml",
    "recommend_cohort",
    "score_cohort",
    "CACHE_VERSION",
    "Contingency",
    "PAPER_REFERENCE",
    "PairStats",
    "ProgressFn",
    "SEED_TWIN_OFFSET",
    "SUBSET_SEED",
    "Sample",
    "StudyResult",
    "StudySettings",
    "WEAK_PARTNER_RATIO",
    "build_report",
    "cache_key",
    "cache_path",
    "cohens_kappa",
    "collect_samples",
    "compare_samples",
    "complementarity",
    "contingency",
    "generate_texts",
    "kappa_standard_error",
    "model_identity",
    "oracle_accuracy",
    "pair_stats",
    "parse_filter",
    "pearson",
    "plot_kappa_heatmap",
    "rank_partners",
    "recommend",
    "run_study",
    "select_problems",
    "wrong_agreement",
]
