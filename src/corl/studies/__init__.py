"""The paper in miniature and the tools that measure it, built on the library.

quickstart (the embedded default: Base / TTRL / Co-RL / GT-Reward on tiny families), claims and
report (each claim with its margin and noise), theory (Proposition 2 and Theorem 1 through corl's
own code), diversity (error decoupling before training), tiny / tiny_vl (families pretrained from
scratch on a generated task, and their design probes), rephrase (wordings per agent), seeds (a
study over whole-pipeline seeds), selection_* (label-free selection studied offline). The library
never imports this package; `corl.studies.plugins` registers the tiny sources through the
registries, imported by the `corl` command and the `corl.plugins` entry point.
"""
