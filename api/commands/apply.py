"""``slaplan apply PLAN_OR_MANIFEST... [--target T] [--kthena-group GROUP] [--dry-run] [--kubeconfig PATH]
[--context C] [--namespace NS]``

Server-side applies (field manager ``slaplan``, forced) what ``slaplan plan`` wrote, and prints
per object whether it was created, configured (with the fields that changed) or unchanged.
Each argument is one of:

- a manifest file (``NAME.dgd.yaml``, ``NAME.<target>.yaml``, any YAML/JSON of custom
  resources; ``-`` for stdin): applied as written;
- a ``NAME.plan.json``: the manifest of ``--target`` written beside it (``NAME.dgd.yaml`` for
  dynamo, the default);
- a directory: every manifest of ``--target`` in it;
- a DGDR file: planned here, as ``slaplan plan`` plans it (with the stored calibration of its
  model, GPU and backend from ``--db``'s database, if any, and a note saying which), and rendered
  for ``--target`` in the API version the cluster serves (Dynamo v1alpha1 or v1beta1, Kthena's
  current or older group: ``--kthena-group`` chooses one, which the cluster must then serve).

``--dry-run`` asks the API server what would change (``dryRun=All``) and stores nothing.
``--namespace`` puts every object in that namespace. Exit codes: 0 all applied, 1 any error
(nothing is applied when an input cannot be read).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from api.commands.arguments import KTHENA_GROUPS, TARGETS, kthena_group
from api.commands.database import add_db_argument

DGDR_KIND = "DynamoGraphDeploymentRequest"


class InputError(ValueError):
    """An argument that cannot be read as manifests or requests."""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("apply", help=summary,
                       description="Server-side apply what `slaplan plan` wrote (or plan a DGDR and apply it).")
    p.add_argument("inputs", nargs="+", metavar="PLAN_OR_MANIFEST",
                   help="manifest file, NAME.plan.json, output directory or DGDR file ('-' for stdin)")
    p.add_argument("--target", choices=TARGETS, default=None,
                   help="system to deploy to for plan files, directories and DGDRs (default: dynamo)")
    p.add_argument("--kthena-group", type=kthena_group, default=None, metavar="GROUP",
                   help=f"API group of Kthena's ModelServing rendered for a DGDR file: {' or '.join(KTHENA_GROUPS)} "
                        f"(default: the one the cluster serves, {KTHENA_GROUPS[1]} when it serves both; only "
                        f"{KTHENA_GROUPS[1]} has an AutoscalingPolicy for a replica range); other files are "
                        "applied as written")
    p.add_argument("--dry-run", action="store_true", help="show what would change; store nothing")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, "
                                                      "or the pod's service account)")
    p.add_argument("--context", default=None, help="kubeconfig context (default: its current context)")
    p.add_argument("--namespace", "-n", default=None, help="namespace for every object (default: each object's own)")
    add_db_argument(p)
    p.set_defaults(func=run)


def _documents(text: str, source: str) -> list[dict[str, Any]]:
    """The objects of a manifest file, read as ``slaplan plan`` reads DGDRs (no aliases, no key
    given twice: ``planner.request.DocumentLoader``); raises InputError."""
    import yaml

    from planner.request import DocumentLoader

    try:
        docs = [d for d in yaml.load_all(text, Loader=DocumentLoader) if d is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(f"{source}: not valid YAML or JSON{where}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: not valid YAML or JSON: {exc}".splitlines()[0]) from None
    except (RecursionError, ValueError):  # nested beyond reason, or an integer of thousands of digits
        raise InputError(f"{source}: not a manifest: nested too deeply or holds a number out of range") from None
    if not docs:
        raise InputError(f"{source}: holds no Kubernetes object")
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
            raise InputError(f"{source}: document {i + 1} is not a Kubernetes object (apiVersion and kind)")
        if doc["kind"] != DGDR_KIND and not (doc.get("metadata") or {}).get("name"):
            raise InputError(f"{source}: {doc['kind']}: metadata.name is required")
    return docs


def _manifest_paths(arg: str, target: str) -> list[Path]:
    """The files an argument stands for (itself, the target's file beside a plan.json, or a directory's)."""
    path = Path(arg)
    suffixes = (".dgd.yaml", ".dgd.yml", ".dgd.json") if target == "dynamo" else (f".{target}.yaml",)
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.name.endswith(suffixes))
        if not found:
            raise InputError(f"{arg}: no {' / '.join('*' + s for s in suffixes)} files "
                             f"(write them with `slaplan plan --target {target}`)")
        return found
    if path.name.endswith(".plan.json"):
        stem = path.name[: -len(".plan.json")]
        beside = [path.with_name(stem + s) for s in suffixes if path.with_name(stem + s).is_file()]
        if not beside:
            raise InputError(f"{arg}: no {stem}{suffixes[0]} beside it (write it with `slaplan plan "
                             f"--target {target}`), or apply the DGDR file to plan and apply in one step")
        return beside[:1]
    return [path]


def read_inputs(args: list[str], target: str) -> list[tuple[str, dict[str, Any]]]:
    """(source, document) of every argument, DGDRs included; raises InputError."""
    out = []
    for arg in args:
        if arg == "-":
            out += [("<stdin>", d) for d in _documents(sys.stdin.read(), "<stdin>")]
            continue
        for path in _manifest_paths(arg, target):
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
            except UnicodeDecodeError:
                raise InputError(f"{path}: not UTF-8 text (a manifest is YAML or JSON)") from None
            out += [(str(path), d) for d in _documents(text, str(path))]
    return out


def _planned(source: str, doc: dict[str, Any], target: str, cluster, args: argparse.Namespace
             ) -> tuple[list[dict], list[str]]:
    """Plan a DGDR (with its stored calibration, if any) and render it for ``target`` as the cluster
    serves it; the notes start with the calibration used."""
    from api.commands.calibration_use import read_calibrations
    from infra.kube_targets import discover
    from infra.planning import plan_with_calibration
    from planner.manifests.targets import render_target
    from planner.request import RequestError, parse_dgdr
    from planner.results import ProfilingResults
    from profiler.model.errors import ModelError
    from profiler.hub import load_model

    try:
        request = parse_dgdr(doc)
        key = (request.model, request.gpu, request.backend)
        calibrations = read_calibrations(args, [key])
        calibration = calibrations.used(key)
        result = plan_with_calibration(request, calibration, model=load_model(request.model))
    except RequestError as exc:
        raise InputError("; ".join(f"{source}: {f}: {m}" for f, m in exc.causes) or f"{source}: {exc}") from None
    except ModelError as exc:
        raise InputError(f"{source}: {exc.message}") from None
    if not result.feasible:
        raise InputError(f"{source}: {request.name}: no deployment meets the SLA: {result.reason}")
    prefer = {"dynamo": doc["apiVersion"].split("/")[-1], "kthena": args.kthena_group}
    options = discover(cluster, targets=(target,), prefer=prefer)
    served = options.api_version(target)  # NotServed when the operator is missing
    if target == "kthena" and args.kthena_group and not served.startswith(args.kthena_group + "/"):
        raise InputError(f"{source}: --kthena-group {args.kthena_group}: the cluster serves Kthena's ModelServing "
                         f"as {served} only")
    try:
        objects, notes = render_target(ProfilingResults.of(result), request, target, **options.render_kwargs())
        return objects, [calibrations.line(key), *notes]
    except ValueError as exc:
        raise InputError(f"{source}: {request.name}: {exc}") from None


def _hint(error: Exception, obj: dict[str, Any]) -> str:
    """What to do about a kind the cluster serves in another version than the manifest's."""
    from infra.kube import NotServed

    if not isinstance(error, NotServed) or not error.served:
        return ""
    if obj["kind"] == "DynamoGraphDeployment":
        return f" (re-plan with `slaplan plan --api-version {error.served[0]}`, or apply the DGDR file)"
    return " (apply the DGDR file to render for the version the cluster serves)"


def run(args: argparse.Namespace) -> int:
    from infra.kube import ClusterError, connect
    from infra.kube_apply import apply_object

    target = args.target or "dynamo"
    try:
        inputs = read_inputs(args.inputs, target)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        cluster = connect(kubeconfig=args.kubeconfig, context=args.context)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    objects: list[tuple[str, dict[str, Any]]] = []
    failed = 0
    for source, doc in inputs:
        if doc["kind"] != DGDR_KIND:
            objects.append((source, doc))
            continue
        try:
            rendered, notes = _planned(source, doc, target, cluster, args)
        except (InputError, ClusterError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        for note in notes:
            print(f"note: {source}: {note}", file=sys.stderr)
        objects += [(source, o) for o in rendered]
    counts: dict[str, int] = {}
    for source, obj in objects:
        obj = json.loads(json.dumps(obj))  # a private copy
        meta = obj.setdefault("metadata", {})
        meta["namespace"] = args.namespace or meta.get("namespace") or "default"
        try:
            result = apply_object(cluster, obj, dry_run=args.dry_run)
        except ClusterError as exc:
            print(f"error: {source}: {obj['kind']} {meta['namespace']}/{meta['name']}: {exc}{_hint(exc, obj)}",
                  file=sys.stderr)
            failed += 1
            continue
        counts[result.action] = counts.get(result.action, 0) + 1
        print(result.line())
    done = ", ".join(f"{n} {action}" for action, n in sorted(counts.items())) or "nothing applied"
    print(f"{sum(counts.values())} object(s): {done}{' (dry run)' if args.dry_run else ''}"
          + (f"; {failed} failed" if failed else ""))
    return 1 if failed else 0
