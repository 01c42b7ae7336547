"""The study, ablation and sweep summaries the report tests read, in the shapes `scalerl study` and
`scalerl ablate` write."""


def ablation_payload(kind: str) -> dict:
    """ablation.json / sweep.json in the shape `scalerl ablate` writes (seed-mean params, effects)."""

    def stats(mean, lo, hi):
        return {"mean": mean, "lo": lo, "hi": hi, "n": 2}

    def seed(a, error=None):
        return {"metrics": "m.jsonl", "params": None if error else {"A": a}, "ceiling_identified": True, "error": error}

    return {
        "kind": kind,
        "sweep_knob": "batch_prompts" if kind == "sweep" else None,
        "base": "scalerl",
        "x": "flops",
        "y": "val_pass_rate",
        "level": 0.8,
        "seeds": 2,
        "margin": {"value": 0.031, "source": "seed spread", "pooled_seed_sd_A": 0.01, "dof": 2},
        "variants": [
            {
                "slug": "scalerl",
                "name": "base",
                "knob": None,
                "is_base": True,
                "seeds": [seed(0.6), seed(0.62)],
                "params": {"A": stats(0.61, 0.6, 0.62), "B": stats(1.9, 1.8, 2.0), "C_mid": stats(2500.0, 2400, 2600)},
                "effect": None,
                "shared_A": None,
                "B_at_shared_A": None,
                "paper": "-",
            },
            {
                "slug": "loss-dapo",
                "name": "dapo",
                "knob": "rl.loss=dapo",
                "is_base": False,
                "seeds": [seed(0.5), seed(None, "fit failed: flat run")],
                "params": {"A": stats(0.5, 0.5, 0.5), "B": stats(1.5, 1.5, 1.5), "C_mid": stats(2600.0, 2600, 2600)},
                "effect": {
                    "effect": "moves the ceiling",
                    "direction": "down",
                    "delta_A": -0.11,
                    "margin": 0.031,
                    "delta_B": None,
                    "B_margin": None,
                    "reason": "|dA| > margin",
                },
                "shared_A": None,
                "B_at_shared_A": None,
                "paper": "moves the ceiling A",
            },
        ],
    }


def study_payload() -> dict:
    """study.json in its documented shape: the base and one variant with a lower ceiling."""
    return {
        "base": "scalerl",
        "x": "flops",
        "y": "val_pass_rate",
        "margin": 0.02,
        "level": 0.8,
        "variants": [
            {
                "slug": "scalerl",
                "name": "scalerl (base)",
                "knob": None,
                "is_base": True,
                "metrics": [],
                "error": None,
                "fit": {
                    "params": {"A": 0.6123, "B": 1.91, "C_mid": 2500.0, "R0": 0.1},
                    "intervals": {"A": [0.6, 0.625], "B": [1.7, 2.1], "C_mid": [2300.0, 2700.0]},
                    "ceiling_identified": True,
                    "n_points": 11,
                    "warnings": [],
                },
                "paper_moves": None,
                "versus_base": None,
            },
            {
                "slug": "loss-dapo",
                "name": "DAPO loss",
                "knob": "rl.loss=dapo",
                "is_base": False,
                "metrics": [],
                "fit": {
                    "params": {"A": 0.5511, "B": 1.5, "C_mid": 2600.0, "R0": 0.1},
                    "intervals": {"A": [0.54, 0.56], "B": [1.3, 1.7], "C_mid": [2400.0, 2800.0]},
                    "ceiling_identified": False,
                    "n_points": 11,
                    "warnings": ["ceiling not identified yet"],
                },
                "error": None,
                "paper_moves": "A",
                "versus_base": {
                    "verdict": "lower ceiling",
                    "decided_by": "ceiling",
                    "delta_A": -0.0612,
                    "B_at_shared_A": None,
                    "shared_A": None,
                    "note": None,
                },
            },
        ],
    }
