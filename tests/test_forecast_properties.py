"""Property-based tests of the forecaster: messy curves and log files give a result or a clear
error (a ScaleRLError, or `error:` and exit code 2 from the CLI), never a traceback. Known
answers on edge-case curves are in test_forecast_known_answers.py."""

import json
import math
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from scalerl.cli.app import app, main
from scalerl.errors import ScaleRLError
from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.readers import read_curve

N_BOOTSTRAP = 20
SLOW_FIT_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    derandomize=True,
)

# --- strategies ----------------------------------------------------------------------------------

special_floats = st.sampled_from([0.0, -1.0, math.nan, math.inf, -math.inf, 1e-300, 1e300])


@st.composite
def messy_curves(draw, damaged=True):
    """(compute, reward, reward_range): a sigmoid-ish curve at a random scale, then maybe damaged."""
    n_points = draw(st.integers(0, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    scale = 10.0 ** draw(st.floats(-3.0, 20.0))
    decades = draw(st.floats(0.5, 4.0))
    compute = scale * np.sort(10.0 ** rng.uniform(-decades, 0.0, n_points))
    if n_points and draw(st.booleans()):
        compute[0] = 0.0
    r0, a = draw(st.floats(0.0, 0.5)), draw(st.floats(0.0, 1.0))
    b, c_mid = draw(st.floats(0.3, 6.0)), scale * 10.0 ** draw(st.floats(-decades, 1.0))
    reward = np.asarray(sigmoid_reward(np.maximum(compute, 1e-300), a, b, c_mid, r0), dtype=float)
    shape = draw(st.sampled_from(["sigmoid", "sigmoid", "sigmoid", "constant", "collapse"]))
    if shape == "constant":
        reward = np.full(n_points, r0)
    elif shape == "collapse" and n_points > 2:
        reward[2 * n_points // 3 :] = r0 * 0.1
    reward = reward + rng.normal(0.0, draw(st.sampled_from([0.0, 0.001, 0.01, 0.05, 0.3])), n_points)
    if draw(st.booleans()):
        reward = np.clip(reward, 0.0, 1.0)
    if damaged and draw(st.integers(0, 2)) == 0:
        compute, reward = _damage(draw, compute, reward)
    reward_range = draw(st.sampled_from([(0.0, 1.0), (0.0, 1.0), None, (-1.0, 50.0), "unbounded"]))
    if reward_range == "unbounded":  # a raw score, not a pass rate: any scale and offset
        reward = reward * 10.0 ** draw(st.floats(-3.0, 6.0)) + draw(st.floats(-100.0, 100.0))
        reward_range = None
    return compute, reward, reward_range


def _damage(draw, compute, reward):
    """Apply a few random defects: duplicates, a shuffle, negatives, NaN / inf, zeros, out-of-range rewards."""
    compute, reward = compute.copy(), reward.copy()
    n_points = compute.size
    defects = st.sampled_from(["dup", "shuffle", "special", "zeros", "out_of_range"])
    for defect in draw(st.lists(defects, min_size=1, max_size=2)):
        if n_points == 0:
            break
        index = draw(st.integers(0, n_points - 1))
        if defect == "dup":
            compute[index] = compute[max(index - 1, 0)]
        elif defect == "shuffle":
            order = np.random.default_rng(index).permutation(n_points)
            compute = compute[order]
        elif defect == "special":
            target = compute if draw(st.booleans()) else reward
            target[index] = draw(special_floats)
        elif defect == "zeros":
            compute[: index + 1] = 0.0
        else:
            reward[index] = draw(st.sampled_from([-0.5, 1.5, 40.0]))
    return compute, reward


def check_fit_result(fit, reward_range):
    """Everything a successful fit promises."""
    params = fit.params()
    assert all(math.isfinite(value) for value in params.values()), params
    assert fit.b > 0 and fit.c_mid > 0
    if reward_range is not None:
        assert reward_range[0] - 1e-9 <= fit.a <= reward_range[1] + 1e-9
    for name, (lo, hi) in fit.conf_int(0.8).items():
        assert lo <= params[name] <= hi, (name, lo, params[name], hi)
    last_compute = float(fit.compute.max())
    for compute in (last_compute * 0.5, last_compute, last_compute * 4.0):
        predicted = float(fit.predict(compute))
        lo, hi = fit.interval(compute, 0.8)
        assert math.isfinite(predicted)
        assert lo <= predicted + 1e-12 and predicted - 1e-12 <= hi
        if reward_range is not None:
            assert reward_range[0] - 1e-9 <= predicted <= reward_range[1] + 1e-9
    json.dumps(fit.to_dict(0.8, predict_at=(last_compute * 4.0,), target=0.5), allow_nan=False)


@given(curve=messy_curves(), r0_seed_form=st.booleans())
@SLOW_FIT_SETTINGS
def test_fit_sigmoid_gives_a_valid_result_or_a_scalerl_error(curve, r0_seed_form):
    compute, reward, reward_range = curve
    try:
        fit = fit_sigmoid(
            compute,
            reward,
            r0=0.0 if r0_seed_form else None,
            reward_range=reward_range,
            n_draws=N_BOOTSTRAP,
            n_starts=2,
        )
    except ScaleRLError as error:
        assert str(error)
        event(f"error: {type(error).__name__}: {str(error)[:40]}")
        return
    event("fitted")
    check_fit_result(fit, reward_range)


odd_numbers = st.one_of(st.none(), st.floats(), st.sampled_from([0.0, 0.5, 1.0, -1.0]))


def mostly(valid, odd):
    """`valid` three times in four, else `odd`."""
    return st.integers(0, 3).flatmap(lambda pick: odd if pick == 0 else valid)


@given(
    curve=messy_curves(),
    r0=mostly(st.sampled_from([None, 0.0]), odd_numbers),
    min_compute=mostly(st.none(), odd_numbers),
    fixed_a=mostly(st.none(), odd_numbers),
    loss=mostly(st.sampled_from(["linear", "soft_l1", "huber", "cauchy", "arctan"]), st.sampled_from(["l2", ""])),
    level=mostly(st.sampled_from([0.5, 0.8, 0.95]), st.floats(allow_nan=True)),
    n_draws=mostly(st.sampled_from([20, 30]), st.sampled_from([0, 19])),
)
@SLOW_FIT_SETTINGS
def test_fit_sigmoid_options_give_a_valid_result_or_a_scalerl_error(
    curve, r0, min_compute, fixed_a, loss, level, n_draws
):
    compute, reward, reward_range = curve
    try:
        fit = fit_sigmoid(
            compute,
            reward,
            r0=r0,
            min_compute=min_compute,
            fixed_a=fixed_a,
            loss=loss,
            level=level,
            reward_range=reward_range,
            n_draws=n_draws,
            n_starts=2,
        )
    except ScaleRLError as error:
        assert str(error)
        event(f"error: {type(error).__name__}: {str(error)[:40]}")
        return
    event("fitted")
    check_fit_result(fit, reward_range)


@given(
    curve=messy_curves(damaged=False),
    target=odd_numbers,
    at=odd_numbers,
    level=mostly(st.sampled_from([0.5, 0.8, 0.95]), st.floats(allow_nan=True)),
    kind=st.sampled_from(["observation", "mean", "other"]),
)
@SLOW_FIT_SETTINGS
def test_fit_result_queries_give_numbers_or_a_scalerl_error(curve, target, at, level, kind):
    compute, reward, reward_range = curve
    try:
        fit = fit_sigmoid(compute, reward, reward_range=reward_range, n_draws=N_BOOTSTRAP, n_starts=2)
    except ScaleRLError:
        return
    event("fitted")
    for query in (
        lambda: fit.interval(at, level, kind),
        lambda: fit.compute_to_reach(target, level),
        lambda: fit.to_dict(level, predict_at=(at,), target=target),
        lambda: fit.conf_int(level),
    ):
        try:
            answer = query()
        except ScaleRLError as error:
            assert str(error)
            continue
        except TypeError:
            if at is None or target is None:  # None is not a number: a caller's programming error
                continue
            raise
        if isinstance(answer, dict):
            json.dumps(answer, allow_nan=False)
        else:
            event(f"answered {type(answer).__name__}")


# --- random log files ----------------------------------------------------------------------------

column_names = st.sampled_from(["gpu_hours", "compute", "flops", "step", "val_pass_rate", "reward", "loss", "", "x y"])
cell_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.integers(-5, 10**6),
    st.sampled_from(["", "nan", "inf", "abc", "1e400", "-0", "null", '"', "{", "1,2"]),
)


@st.composite
def csv_texts(draw):
    header = draw(st.lists(column_names, min_size=0, max_size=4))
    rows = draw(st.lists(st.lists(cell_values, min_size=0, max_size=5), max_size=15))
    lines = [",".join(header)] + [",".join(str(cell) for cell in row) for row in rows]
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.text(max_size=20)))
    return "\n".join(lines)


@st.composite
def plausible_csv_texts(draw):
    """A gpu_hours / val_pass_rate log with now and then a bad cell, a gap or a garbage line."""
    n_rows = draw(st.integers(0, 20))
    numbers = st.floats(0.0, 1e6, allow_nan=False)
    rows = [[draw(numbers), draw(st.floats(0.0, 1.0))] for _ in range(n_rows)]
    lines = ["gpu_hours,val_pass_rate"] + [f"{hours!r},{reward!r}" for hours, reward in rows]
    for _ in range(draw(st.integers(0, 2))):
        bad_line = draw(st.sampled_from(["", "5,", ",0.3", "x,y", "7,nan", "1,2,3", "-3,0.2", "1e400,0.5"]))
        lines.insert(draw(st.integers(1, len(lines))), bad_line)
    return "\n".join(lines)


# Numbers past the float range or past Python's int-string limit, and nesting past the recursion limit.
HOSTILE_JSON_LINES = (
    '{"gpu_hours": 1' + "0" * 400 + ', "reward": 0.5}',
    '{"gpu_hours": 1' + "0" * 5000 + ', "reward": 0.5}',
    '{"a": ' * 5000 + "1" + "}" * 5000,
)


@st.composite
def jsonl_texts(draw):
    keys = st.sampled_from(["gpu_hours", "step", "val_pass_rate", "reward", "tokens", "other"])
    values = st.one_of(st.floats(width=32), st.integers(-3, 10**9), st.none(), st.text(max_size=4), st.booleans())
    lines = [json.dumps(row) for row in draw(st.lists(st.dictionaries(keys, values, max_size=4), max_size=15))]
    garbage_lines = st.sampled_from(["{", "[1, 2]", "not json", "", "NaN", '"text"', "{}", *HOSTILE_JSON_LINES])
    for garbage in draw(st.lists(garbage_lines, max_size=3)):
        lines.insert(draw(st.integers(0, len(lines))), garbage)
    return "\n".join(lines)


log_files = st.one_of(
    st.tuples(st.sampled_from([".jsonl", ".json"]), st.sampled_from(HOSTILE_JSON_LINES + ("[" * 5000,))),
    st.tuples(st.just(".csv"), csv_texts()),
    st.tuples(st.sampled_from([".csv", ".tsv"]), plausible_csv_texts()),
    st.tuples(st.just(".jsonl"), jsonl_texts()),
    st.tuples(st.sampled_from([".csv", ".jsonl", ".txt", ".tsv"]), st.text(max_size=60)),
)


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("logs")


def write_log(directory, suffix, text):
    path = directory / f"run{suffix}"
    path.write_text(text, encoding="utf-8")
    return path


@given(log=log_files)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_read_curve_gives_a_clean_curve_or_a_scalerl_error(log_dir, log):
    path = write_log(log_dir, *log)
    try:
        curve = read_curve(path)
    except ScaleRLError as error:
        assert str(error)
        event(f"error: {str(error)[:50]}")
        return
    event("read")
    assert curve.compute.size == curve.reward.size == len(curve)
    assert np.all(np.isfinite(curve.compute)) and np.all(curve.compute >= 0)
    assert np.all(np.diff(curve.compute) > 0)


@pytest.mark.parametrize("text", HOSTILE_JSON_LINES + ("[" * 5000,))
def test_hostile_json_numbers_and_nesting_are_input_errors(log_dir, text):
    # Found by the property test: float() of a 400-digit int overflows, json rejects a 5000-digit
    # one with a plain ValueError, deep nesting raises RecursionError.
    with pytest.raises(ScaleRLError):
        read_curve(write_log(log_dir, ".jsonl", text))


def curve_file_text(compute, reward):
    rows = ["gpu_hours,val_pass_rate"] + [f"{c!r},{r!r}" for c, r in zip(compute.tolist(), reward.tolist())]
    return "\n".join(rows) + "\n"


cli_inputs = st.one_of(
    messy_curves().map(lambda curve: (".csv", curve_file_text(curve[0], curve[1]))),
    log_files,
)


@pytest.mark.filterwarnings("ignore:Generating overly large repr")  # the hostile 5000-digit lines
@given(log=cli_inputs)
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_cli_fit_json_gives_one_object_or_one_error_line(log_dir, log):
    path = write_log(log_dir, *log)
    result = CliRunner().invoke(app, ["fit", str(path), "--json", "--n-draws", str(N_BOOTSTRAP)])
    assert "Traceback" not in result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    event(f"exit code {result.exit_code}")
    if result.exit_code == 0:
        assert result.stdout.count("\n") == 1
        payload = json.loads(result.stdout, parse_constant=lambda token: pytest.fail(f"non-standard JSON {token}"))
        assert set(payload) >= {"params", "intervals", "ceiling_identified", "n_points"}
    else:
        assert result.exit_code == 2, result.output
        error_lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(error_lines) == 1 and error_lines[0].startswith("error: "), result.stderr


option_values = st.one_of(
    st.floats(-1e30, 1e30, allow_nan=False).map(repr),
    st.sampled_from(["0", "0.5", "1", "2", "1e4", "-1", "nan", "inf", "-inf", "abc", "", "1e400", "3,4"]),
)
fit_options = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from(
                ["--r0", "--min-x", "--fit-until", "--fit-fraction", "--predict-at", "--target", "--level", "--n-draws"]
            ),
            option_values,
        ),
        st.tuples(st.just("--reward-range"), option_values, option_values),
        st.tuples(
            st.sampled_from(["--loss", "--x", "--y"]),
            st.sampled_from(["linear", "huber", "l3", "gpu_hours", "val_pass_rate", "missing"]),
        ),
        st.tuples(st.sampled_from(["--power-law", "--fit-through-collapse", "--bogus"])),
    ),
    max_size=4,
)


def run_main(capsys, argv):
    """Run the `scalerl` entry point on argv; return (exit code, stdout, stderr)."""
    saved_argv = sys.argv
    sys.argv = ["scalerl", *argv]
    try:
        main()
        exit_code = 0
    except SystemExit as exit_signal:
        exit_code = exit_signal.code
    finally:
        sys.argv = saved_argv
    captured = capsys.readouterr()
    return exit_code, captured.out, captured.err


@given(curve=messy_curves(damaged=False), options=fit_options)
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_cli_fit_options_give_one_object_or_one_error_line(log_dir, capsys, curve, options):
    path = write_log(log_dir, ".csv", curve_file_text(curve[0], np.clip(curve[1], 0.0, 1.0)))
    argv = ["fit", str(path), "--json"] + [str(part) for option in options for part in option]
    if "--n-draws" not in argv:
        argv += ["--n-draws", str(N_BOOTSTRAP)]
    exit_code, stdout, stderr = run_main(capsys, argv)
    event(f"exit code {exit_code}")
    assert "Traceback" not in stdout + stderr
    if exit_code == 0:
        assert stdout.count("\n") == 1
        json.loads(stdout, parse_constant=lambda token: pytest.fail(f"non-standard JSON {token}"))
    else:
        assert exit_code == 2, (exit_code, stderr)
        error_lines = [line for line in stderr.splitlines() if line.strip()]
        assert len(error_lines) == 1 and error_lines[0].startswith("error: "), stderr
