"""kindling.eval: replay held-out past sessions against a model, cold and warm, and compare.

    with plan_eval(["runs/"], EvalOptions(sessions=50)) as plan:
        print(estimate(plan, endpoint, results="results.jsonl"))   # the dry run: nothing sent
        report = run_eval(plan, endpoint, api_key=key, results="results.jsonl")
    print(report["verdict"]["line"])

``plan_eval`` reads the sources, splits them into folds by task, builds each fold's template from
the other folds and makes the replay cases; ``run_eval`` asks the model what the results file does
not hold yet and scores both answers of every case; the report holds every metric cold and warm
with its paired bootstrap interval, per tool, the tokens the warm-up adds, and the verdict.
"""

from __future__ import annotations

from kindling.eval.plan import EvalOptions, EvalPlan, plan_eval
from kindling.eval.run import Endpoint, estimate, run_eval

__all__ = ["Endpoint", "EvalOptions", "EvalPlan", "estimate", "plan_eval", "run_eval"]
