"""Our ledger's epsilon against Google's dp-accounting, on real ``privacy.json`` files.

    python scripts/reports/accountant_crosscheck.py [--ledger PATH ...] [--pld-interval 1e-4]

For each ledger: ours is ``rdpgan.privacy.ledger.recompute_epsilon(record)`` (whatever the
ledger's accountant and settings are, e.g. a Rényi ``order`` it records). The same Gaussian
entries are then composed by dp-accounting (``PoissonSampledDpEvent(q, GaussianDpEvent(σ))``
self-composed ``steps`` times; an entry with sample rate 1 a plain ``GaussianDpEvent``), at the
delta the ledger leaves its accountant (delta less the approximate entries' deltas): by its
``RdpAccountant`` at its default orders (and the optimal order it picks), at the ledger's
recorded order when there is one, and by its ``PLDAccountant`` (a tight numerical accountant,
pessimistic discretisation at ``--pld-interval``). Each gets the pure and approximate entries'
epsilons added, as ours does. The default input is ``results/privacy_example.json`` (the
ledger under its ``privacy.json`` key). Writes ``results/accountant_crosscheck.md`` (a table
per ledger, provenance after) and ``results/accountant_crosscheck.csv`` (a row per ledger and
accountant, with the command, date, commit and machine).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shlex
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.machine_info import code_commit, machine_line

from rdpgan.privacy.budget import NON_PRIVATE
from rdpgan.privacy.ledger import accountant_delta, basic_epsilon, recompute_epsilon

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "results"
DEFAULT_LEDGER = RESULTS / "privacy_example.json"
OUT_MD = RESULTS / "accountant_crosscheck.md"
OUT_CSV = RESULTS / "accountant_crosscheck.csv"
# dp-accounting's own default; its pessimistic PLD is an upper bound up to this grid's rounding
# (made in the loose direction), so a finer interval only tightens it.
PLD_INTERVAL = 1e-4
DEFAULT_ORDERS = "dp-accounting RDP, default orders"
COLUMNS = [
    "ledger",
    "ledger_accountant",
    "recorded_order",
    "delta",
    "accountant_delta",
    "gaussian_entries",
    "basic_epsilon",
    "method",
    "gaussian_epsilon",
    "epsilon",
    "minus_ours",
    "relative_to_ours",
    "order",
    "seconds",
    "command",
    "date",
    "commit",
    "machine",
]


def load_ledger(path: Path) -> dict[str, Any]:
    """The ledger in ``path``: the file itself, or a record wrapping it under one key (as
    ``results/privacy_example.json`` does under ``privacy.json``)."""
    record = json.loads(path.read_text())
    if isinstance(record, dict) and "mechanisms" in record:
        return record
    if isinstance(record, dict):
        wrapped = [v for v in record.values() if isinstance(v, dict) and "mechanisms" in v]
        if len(wrapped) == 1:
            return wrapped[0]
    raise SystemExit(f"{path}: no privacy ledger (a dict with 'mechanisms') in it")


def recorded_order(ledger: dict[str, Any]) -> float | None:
    """The one Rényi order the ledger composes at (none in ledgers from before it was fixed)."""
    order = ledger.get("order")
    return None if order is None else float(order)


def gaussian_entries(ledger: dict[str, Any]) -> list[tuple[float, float, int]]:
    """(σ, q, steps) of the Gaussian entries that cost anything, read from the file."""
    out = []
    for m in ledger["mechanisms"]:
        if m["kind"] != "gaussian":
            continue
        sigma, q, steps = float(m["noise_multiplier"]), float(m["sample_rate"]), int(m["steps"])
        if steps > 0 and q > 0 and not math.isinf(sigma):
            out.append((sigma, q, steps))
    return out


def dp_event(entries: list[tuple[float, float, int]]) -> dp_accounting.DpEvent:
    events = []
    for sigma, q, steps in entries:
        event: dp_accounting.DpEvent = dp_accounting.GaussianDpEvent(sigma)
        if q < 1.0:
            event = dp_accounting.PoissonSampledDpEvent(q, event)
        events.append(dp_accounting.SelfComposedDpEvent(event, steps))
    return dp_accounting.ComposedDpEvent(events)


def dp_rdp(
    entries: list[tuple[float, float, int]], delta: float, orders: list[float] | None = None
) -> tuple[float, float | None]:
    """dp-accounting's RDP epsilon at ``delta`` (its default orders, or ``orders``) and the
    order it is attained at."""
    if not entries:
        return 0.0, None
    accountant = rdp_privacy_accountant.RdpAccountant(orders=orders)
    accountant.compose(dp_event(entries))
    eps, order = accountant.get_epsilon_and_optimal_order(delta)
    return float(eps), float(order)


def dp_pld(entries: list[tuple[float, float, int]], delta: float, interval: float) -> float:
    if not entries:
        return 0.0
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    accountant.compose(dp_event(entries))
    return float(accountant.get_epsilon(delta))


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def crosscheck(path: Path, interval: float) -> dict[str, Any]:
    """One ledger's rows (a dict per accountant) and what the table's caption says of it."""
    ledger = load_ledger(path)
    kind, delta = ledger["accountant"], float(ledger["delta"])
    if kind == NON_PRIVATE:
        return {"path": path, "ledger": ledger, "rows": [], "skipped": "not private"}
    delta_left = accountant_delta(delta, ledger["mechanisms"])
    basic = basic_epsilon(ledger["mechanisms"])
    entries = gaussian_entries(ledger)
    order = recorded_order(ledger)

    ours, seconds = timed(recompute_epsilon, ledger)
    rows = [
        {
            "method": f"ours: recompute_epsilon ({kind})",
            "epsilon": ours,
            "seconds": seconds,
        }
    ]
    if ledger.get("epsilon_spent") is not None:
        rows.append(
            {
                "method": "ours: epsilon_spent as recorded",
                "epsilon": float(ledger["epsilon_spent"]),
            }
        )
    (eps, best), seconds = timed(dp_rdp, entries, delta_left)
    rows.append(
        {
            "method": DEFAULT_ORDERS,
            "epsilon": eps + basic,
            "order": best,
            "seconds": seconds,
        }
    )
    if order is not None:
        (eps, _), seconds = timed(dp_rdp, entries, delta_left, [order])
        rows.append(
            {
                "method": "dp-accounting RDP, recorded order",
                "epsilon": eps + basic,
                "order": order,
                "seconds": seconds,
            }
        )
    eps, seconds = timed(dp_pld, entries, delta_left, interval)
    rows.append(
        {
            "method": f"dp-accounting PLD, interval {interval:g}",
            "epsilon": eps + basic,
            "seconds": seconds,
        }
    )
    for row in rows:
        row["gaussian_epsilon"] = row["epsilon"] - basic
        row["minus_ours"] = row["epsilon"] - ours
        row["relative_to_ours"] = row["epsilon"] / ours - 1 if ours else math.nan
    return {
        "path": path,
        "ledger": ledger,
        "rows": rows,
        "delta": delta,
        "delta_left": delta_left,
        "basic": basic,
        "entries": entries,
        "order": order,
    }


def fmt(value: float | None, spec: str = ".4f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:{spec}}"


def table(check: dict[str, Any]) -> str:
    head = f"## `{shown(check['path'])}`"
    if check.get("skipped"):
        return f"{head}\n\nSkipped: {check['skipped']} (accountant `{NON_PRIVATE}`)."
    ledger, entries = check["ledger"], check["entries"]
    lines = [
        head,
        "",
        "| accountant | ε Gaussian entries | ε total | minus ours | relative | order |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for i, row in enumerate(check["rows"]):
        first = i == 0
        lines.append(
            f"| {row['method']} | {fmt(row['gaussian_epsilon'])} | {fmt(row['epsilon'])} "
            f"| {'—' if first else fmt(row['minus_ours'], '+.4f')} "
            f"| {'—' if first else fmt(100 * row['relative_to_ours'], '+.3f') + '%'} "
            f"| {fmt(row.get('order'), 'g')} |"
        )
    subsampled = [e for e in entries if e[1] < 1.0]
    approximate = [m for m in ledger["mechanisms"] if m["kind"] == "approximate"]
    pure = [m for m in ledger["mechanisms"] if m["kind"] == "pure"]
    parts = [
        f"accountant `{ledger['accountant']}`, δ = {check['delta']:g}"
        f" (δ left to the accountant: {check['delta_left']:g})",
        f"recorded Rényi order: {fmt(check['order'], 'g')}",
        f"{len(entries)} Gaussian entries ({len(entries) - len(subsampled)} plain"
        + "".join(f"; σ {s:.4g}, q {q:.4g}, {t} steps" for s, q, t in subsampled)
        + ")",
        f"basic entries ({len(pure)} pure, {len(approximate)} approximate) add ε "
        f"{check['basic']:.4f} to every row",
    ]
    lines += ["", "; ".join(parts) + "."]
    return "\n".join(lines)


def main() -> None:
    commit, date = code_commit(), datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ledger", type=Path, nargs="+", default=[DEFAULT_LEDGER])
    parser.add_argument("--pld-interval", type=float, default=PLD_INTERVAL)
    args = parser.parse_args()
    command = shlex.join(["python", "scripts/reports/accountant_crosscheck.py", *sys.argv[1:]])
    machine = machine_line()

    checks = [crosscheck(path, args.pld_interval) for path in args.ledger]
    tables = [table(check) for check in checks]
    print("\n\n".join(tables))
    orders = ", ".join(
        f"{row['order']:g} ({shown(check['path'])})"
        for check in checks
        for row in check["rows"]
        if row["method"] == DEFAULT_ORDERS and row.get("order") is not None
    )
    if orders:
        print(f"\ndp-accounting RDP's optimal order (default orders): {orders}")

    text = [
        "# Our ledger's epsilon against Google's dp-accounting",
        "",
        *(t + "\n" for t in tables),
        "`minus ours` and `relative`: the row's ε total less ours, and as a share of ours "
        "(positive: ours is the tighter). Ours is `rdpgan.privacy.ledger.recompute_epsilon` on "
        "the file, at the code's commit below (not the commit that wrote the ledger). "
        "dp-accounting (version "
        f"{metadata.version('dp-accounting')}) composes the same Gaussian entries "
        "(add-or-remove-one neighbours): each `PoissonSampledDpEvent(q, GaussianDpEvent(σ))` "
        "self-composed `steps` times, a plain `GaussianDpEvent(σ)` where q = 1, all at the δ the "
        "ledger leaves its accountant. `RDP, default orders`: `RdpAccountant()` at its "
        "`DEFAULT_RDP_ORDERS` (1.1–10.9 by 0.1, 11–63, 128, 256, 512, 1024), with the order its "
        "`get_epsilon_and_optimal_order` picks; `RDP, recorded order`: `RdpAccountant(orders="
        "[order])` at the order the ledger records (a row only where it records one). `PLD`: "
        f"`PLDAccountant(value_discretization_interval={args.pld_interval:g})`, its pessimistic "
        "estimate (an upper bound up to that grid; the RDP rows are upper bounds, looser by "
        "construction). At a fractional order dp-accounting sums the absolute values of the "
        "subsampled Gaussian's series (`_compute_log_a_frac`), an upper bound a little above "
        "the signed sum Opacus (and so our rdp) takes; at integer orders, and for q = 1, the "
        "two agree to rounding. Every dp-accounting row adds the ledger's pure and approximate "
        "entries' epsilons, as ours does. Rows with the accountants' seconds: "
        f"`{OUT_CSV.name}`.",
        "",
        f"Made by `{command}` on {date} at {commit}, machine {machine}.",
        "",
    ]
    OUT_MD.write_text("\n".join(text))
    with OUT_CSV.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for check in checks:
            for row in check["rows"]:
                writer.writerow(
                    {
                        "ledger": shown(check["path"]),
                        "ledger_accountant": check["ledger"]["accountant"],
                        "recorded_order": check["order"],
                        "delta": check["delta"],
                        "accountant_delta": check["delta_left"],
                        "gaussian_entries": len(check["entries"]),
                        "basic_epsilon": check["basic"],
                        "method": row["method"],
                        "gaussian_epsilon": row["gaussian_epsilon"],
                        "epsilon": row["epsilon"],
                        "minus_ours": row["minus_ours"],
                        "relative_to_ours": row["relative_to_ours"],
                        "order": row.get("order"),
                        "seconds": None if row.get("seconds") is None else f"{row['seconds']:.3f}",
                        "command": command,
                        "date": date,
                        "commit": commit,
                        "machine": machine,
                    }
                )
    print(f"\nwrote {shown(OUT_MD)} and {shown(OUT_CSV)}")


if __name__ == "__main__":
    main()
