"""progscore on a Ray cluster: programs spread over the cluster's nodes, the
evidence and the verdicts kept by the driver.

The driver (the process that calls ``score_many_async``, or ``python -m
progscore.ray score``) keeps the scorer and the single SQLite store: attempt
keys, observation ids and verdicts are made there exactly as for a local run,
so a rerun on the cluster reuses what any node already ran. Each node runs
one progscore runtime, a named Ray actor placed on it, which runs programs on
that node's own backends (Docker, OCI or WASI, as its config says) and
returns only the run, never a verdict.

- **Capacity.** A node's runtime takes at most ``capacity`` programs at once
  (the actor's ``max_concurrency``: 3 per CPU Ray counts on the node, as
  ``progscore score --jobs``). The runtimes are shared by every driver of
  the cluster (one per node and config, found by name), so the cap holds
  for the cluster as a whole, whatever the callers do.
- **Consistency.** Before a profile's first program, every node checks it;
  a node that cannot run it (no engine, missing image) gets none of its
  programs, and nodes that resolve it differently (another runtime version)
  are left out too, so that one attempt key never stands for two setups.
- **Faults.** A node lost mid-run (its raylet or worker killed) gives no
  result: its programs run again on another node, and nothing of the lost
  run is stored. Cancelling a score (Ctrl-C, SIGTERM of the CLI) cancels its
  run on the node, which removes its containers before the call ends.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, ParamSpec, TypeVar, Union

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from . import (
    ProgscoreError,
    SandboxRefusedError,
    Score,
    ScoringItem,
    _bytes_from_json,
    _native,
    _run,
)

__all__ = ["NAMESPACE", "NODE_CONFIG_ENV", "NodeStats", "RayScorer", "score_many", "score_many_async", "stop_runtimes"]

NAMESPACE = "progscore"
"""The Ray namespace of progscore's node runtimes."""

NODE_CONFIG_ENV = "PROGSCORE_RAY_NODE_CONFIG"
"""Set in a node's environment (its raylet's), the config its runtime loads
instead of the driver's path."""

_P = ParamSpec("_P")
_T = TypeVar("_T")

# How long a cancelled run may take to end on its node (its cleanup) before
# the driver stops waiting for it.
_CANCEL_GRACE_S = 60.0

# What Ray raises when the process or node that ran a call is gone: the call
# gave nothing, and runs again elsewhere.
_LOST = (
    ray.exceptions.RayActorError,
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.ObjectLostError,
    ray.exceptions.OwnerDiedError,
)


# How often a node's runtime asks the cluster which of its drivers are
# still alive (a driver killed outright cannot detach).
_LIVENESS_PERIOD_S = 1.0


def _dead_jobs() -> set[str]:
    """The ids (hex) of the cluster's jobs whose driver is gone, as the GCS
    records them: a driver's job is marked dead when its process ends,
    however it ends (SIGKILL included). Ray has no public call for this
    without the dashboard; its state module's job table is what
    ``ray list jobs`` reads."""
    from ray._private import state

    return {str(job["JobID"]) for job in state.jobs() if job.get("IsDead")}  # type: ignore[no-untyped-call]


class _DriverGone(Exception):
    """This runtime is ending (no driver holds it): the caller places a new one."""


class _NodeRuntime:
    """progscore's runtime on one node (a Ray actor): answers the driver's
    requests from this node's own backends.

    It lives while a live driver holds it: drivers attach by their job and
    detach when they end; a driver killed outright cannot detach, so the
    runtime also asks the cluster, every second, which of its drivers' jobs
    are dead and drops them. With no driver left and nothing running, it
    ends (never by cutting short a run in flight: a dead driver's runs end
    first, within their limits)."""

    def __init__(self, config_path: str, capacity: int) -> None:
        # A node may keep its config elsewhere (NODE_CONFIG_ENV in the
        # node's environment); its preflight proves it equivalent.
        self._config_path = os.environ.get(NODE_CONFIG_ENV, config_path)
        self._client = _native.NativeClient.from_config(self._config_path)
        self._capacity = capacity
        self._running = 0
        self._peak = 0
        self._served = 0
        # Per driver's job: how many of its scorers are attached.
        self._drivers: dict[str, int] = {}
        self._ending = False
        self._watcher: Optional[asyncio.Task[None]] = None

    async def attach(self, job_id: str) -> dict[str, Any]:
        """A driver (by its job) starts using this runtime; its figures."""
        if self._ending:
            raise _DriverGone("this runtime is ending; place a new one")
        self._drivers[job_id] = self._drivers.get(job_id, 0) + 1
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch_drivers())
        return self._figures()

    async def detach(self, job_id: str) -> None:
        """A driver is done with this runtime. The last one ends it: nothing
        of progscore stays on the node between batches (a driver that
        attaches meanwhile places a new one)."""
        left = self._drivers.get(job_id, 0) - 1
        if left > 0:
            self._drivers[job_id] = left
        else:
            self._drivers.pop(job_id, None)
        if self._idle():
            self._end("its last driver detached")
            ray.actor.exit_actor()  # type: ignore[no-untyped-call]

    def _idle(self) -> bool:
        return not self._drivers and self._running == 0

    def _end(self, why: str) -> None:
        """Refuses new drivers from now on, and says why it ends (in the
        node's worker log)."""
        self._ending = True
        print(
            f"progscore.ray runtime on node {ray.get_runtime_context().get_node_id()[:12]}: ended: {why}; "
            f"served {self._served}, running {self._running}",
            flush=True,
        )

    async def _watch_drivers(self) -> None:
        while not self._ending:
            await asyncio.sleep(_LIVENESS_PERIOD_S)
            try:
                dead = await asyncio.to_thread(_dead_jobs)
            except Exception as error:  # noqa: BLE001 - the GCS is away: ask again
                print(f"progscore.ray runtime: cannot read the cluster's jobs: {error}", flush=True)
                continue
            gone = [job for job in self._drivers if job in dead]
            for job in gone:
                del self._drivers[job]
            if gone:
                print(f"progscore.ray runtime: driver job(s) {', '.join(sorted(gone))} gone without detaching", flush=True)
            if self._idle() and not self._ending:
                self._end("no live driver holds it")
                ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
                return

    async def serve(self, request_json: str) -> str:
        self._running += 1
        self._peak = max(self._peak, self._running)
        try:
            return await _run(lambda waker: self._client.start_serve(waker, request_json))
        finally:
            self._running -= 1
            self._served += 1

    @ray.method(concurrency_group="control")
    async def stats(self) -> dict[str, Any]:
        """This runtime's figures, answered beside the runs (a concurrency
        group of its own): a node running at its cap still answers."""
        return self._figures()

    def _figures(self) -> dict[str, Any]:
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "capacity": self._capacity,
            "running": self._running,
            "peak": self._peak,
            "served": self._served,
            "pid": os.getpid(),
            "config": self._config_path,
            "docker_owner": self._client.docker_owner(),
            "docker_workspaces": self._client.docker_workspaces(),
            "drivers": sum(self._drivers.values()),
        }


@dataclass(frozen=True)
class NodeStats:
    """What one node's runtime has done since it started (shared by all
    drivers): programs running now, the most it ever ran at once, requests
    answered."""

    node_id: str
    capacity: int
    running: int
    peak: int
    served: int
    pid: int
    # The node's Docker containers' owner label and workspace folder (None
    # without a Docker profile).
    docker_owner: Optional[str] = None
    docker_workspaces: Optional[str] = None


@dataclass
class _Node:
    node_id: str
    capacity: int
    actor: Any
    in_flight: int = 0
    lost: Optional[str] = None
    # Per profile: the preflight reply, or why this node cannot run it.
    checked: dict[str, dict[str, Any]] = field(default_factory=dict)


def _config_digest(config_path: str) -> str:
    with open(config_path, "rb") as config:
        return hashlib.sha256(config.read()).hexdigest()[:16]


def _say(message: str) -> None:
    print(f"progscore.ray: {message}", file=sys.stderr, flush=True)


class _Cluster:
    """The node runtimes one driver uses, and where each request goes."""

    def __init__(self, config_path: str, jobs_per_node: Optional[int], node_resource: Optional[str]) -> None:
        self._config_path = os.path.abspath(config_path)
        self._jobs_per_node = jobs_per_node
        self._node_resource = node_resource
        self.nodes: list[_Node] = []
        self._preflights: dict[str, asyncio.Future[str]] = {}
        # This driver's job: what the runtimes hold on to while it lives.
        self._job_id = ""

    async def start(self) -> None:
        """Finds (or places) one runtime on every alive node with CPUs (and
        the node resource, when one is asked for), and attaches to it."""
        digest = _config_digest(self._config_path)
        self._job_id = ray.get_runtime_context().get_job_id()
        # `stats` answers in a group of its own, beside the runs that fill
        # max_concurrency (Ray's stubs do not list this keyword).
        runtime_class = ray.remote(concurrency_groups={"control": 2})(_NodeRuntime)  # type: ignore[call-overload]
        placed = []
        for node in ray.nodes():  # type: ignore[no-untyped-call]
            cpus = int(node.get("Resources", {}).get("CPU", 0))
            if not node.get("Alive") or cpus <= 0:
                continue
            if self._node_resource and node.get("Resources", {}).get(self._node_resource, 0) <= 0:
                continue
            node_id = str(node["NodeID"])
            capacity = self._jobs_per_node or _native.jobs_for_cores(cpus)

            def place(node_id: str = node_id, capacity: int = capacity) -> Any:
                return runtime_class.options(
                    name=f"progscore-{digest}-{node_id[:16]}",
                    namespace=NAMESPACE,
                    # Shared by every driver; the last to detach ends it.
                    lifetime="detached",
                    get_if_exists=True,
                    max_concurrency=capacity,
                    max_restarts=0,
                    num_cpus=0,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                ).remote(self._config_path, capacity)

            placed.append((node_id, place))
        attached = await asyncio.gather(*(self._attach(node_id, place) for node_id, place in placed))
        self.nodes = [node for node in attached if node is not None]
        if not self.nodes:
            wanted = f" and the resource `{self._node_resource}`" if self._node_resource else ""
            raise ProgscoreError(f"the Ray cluster has no alive node with CPUs{wanted} to run programs on")

    async def _attach(self, node_id: str, place: Any) -> Optional[_Node]:
        """The node's runtime, attached; None when it cannot start there."""
        error: BaseException | None = None
        for pause in (0.0, 0.2, 0.5, 1.0):
            # A runtime that its last driver just ended is gone in a moment:
            # placed again, under the same name.
            await asyncio.sleep(pause)
            actor = place()
            try:
                stats = await actor.attach.remote(self._job_id)
            except (*_LOST, _DriverGone) as lost:
                error = lost
                continue
            # The capacity is the runtime's own (its first driver's).
            return _Node(node_id=node_id, capacity=int(stats["capacity"]), actor=actor)
        first_line = str(error).strip().splitlines()[-1] if error is not None and str(error).strip() else repr(error)
        _say(f"node {node_id[:12]}: progscore's runtime could not start there ({first_line}); it gets no programs")
        return None

    async def stop(self) -> None:
        """Detaches from every runtime still reachable."""

        async def detach(node: _Node) -> None:
            try:
                await asyncio.wait_for(asyncio.ensure_future(node.actor.detach.remote(self._job_id)), 30.0)
            except BaseException:  # noqa: BLE001 - gone already, or ending
                pass

        await asyncio.gather(*(detach(node) for node in self.nodes if node.lost is None))

    @property
    def capacity(self) -> int:
        return sum(node.capacity for node in self.nodes if node.lost is None)

    async def handle(self, request_json: str) -> str:
        request = json.loads(request_json)
        profile = str(request.get("profile"))
        if request.get("kind") == "preflight":
            return await self.preflight(profile)
        return await self.execute(profile, request_json)

    def preflight(self, profile: str) -> asyncio.Future[str]:
        """The profile's preflight, asked of every node once per driver."""
        known = self._preflights.get(profile)
        if known is None:
            known = self._preflights[profile] = asyncio.ensure_future(self._preflight(profile))
        return known

    async def _preflight(self, profile: str) -> str:
        request = json.dumps({"kind": "preflight", "profile": profile})
        alive = [node for node in self.nodes if node.lost is None]

        async def ask(node: _Node) -> dict[str, Any]:
            try:
                reply: dict[str, Any] = json.loads(await node.actor.serve.remote(request))
            except _LOST as error:
                self._lose(node, error)
                reply = {"kind": "refused", "message": f"node lost: {error}", "transient": True}
            except ray.exceptions.RayTaskError as error:
                reply = {"kind": "refused", "message": str(error), "transient": False}
            node.checked[profile] = reply
            return reply

        replies = await asyncio.gather(*(ask(node) for node in alive))
        groups: dict[str, list[_Node]] = {}
        for node, reply in zip(alive, replies):
            if reply.get("kind") == "preflight":
                key = json.dumps(reply["fingerprint"], sort_keys=True)
                groups.setdefault(key, []).append(node)
        if not groups:
            reasons = "; ".join(f"node {n.node_id[:12]}: {r.get('message')}" for n, r in zip(alive, replies))
            transient = all(bool(r.get("transient")) for r in replies)
            return json.dumps(
                {
                    "kind": "refused",
                    "message": f"no node of the cluster can run profile `{profile}`: {reasons}",
                    "transient": transient,
                }
            )
        # The setup most of the capacity resolves to stands for the profile.
        chosen = max(groups.values(), key=lambda nodes: sum(n.capacity for n in nodes))
        for node, reply in zip(alive, replies):
            if node in chosen:
                continue
            if reply.get("kind") == "preflight":
                why = "it resolves the profile differently from the other nodes (its attempts would not be the same)"
                node.checked[profile] = {"kind": "refused", "message": why, "transient": False}
            else:
                why = str(reply.get("message"))
            _say(f"node {node.node_id[:12]} cannot run profile `{profile}`: {why}; it gets none of its programs")
        return json.dumps(node_reply(chosen[0].checked[profile]))

    def _eligible(self, profile: str) -> list[_Node]:
        return [
            node
            for node in self.nodes
            if node.lost is None and node.checked.get(profile, {}).get("kind") == "preflight"
        ]

    def _lose(self, node: _Node, error: BaseException) -> None:
        if node.lost is None:
            node.lost = str(error).splitlines()[0] if str(error) else type(error).__name__
            _say(f"node {node.node_id[:12]} lost ({type(error).__name__}); its programs run again on the other nodes")

    async def execute(self, profile: str, request_json: str) -> str:
        await self.preflight(profile)
        while True:
            nodes = self._eligible(profile)
            if not nodes:
                lost = "; ".join(f"node {n.node_id[:12]}: {n.lost}" for n in self.nodes if n.lost)
                return json.dumps(
                    {
                        "kind": "refused",
                        "message": f"no node of the cluster can run profile `{profile}` any more ({lost or 'none passed its preflight'})",
                        "transient": True,
                    }
                )
            node = min(nodes, key=lambda n: n.in_flight / n.capacity)
            node.in_flight += 1
            call = node.actor.serve.remote(request_json)
            try:
                return str(await _cancellable(call))
            except _LOST as error:
                # Nothing of the lost run is used: it runs again elsewhere.
                self._lose(node, error)
            except ray.exceptions.RayTaskError as error:
                return json.dumps({"kind": "refused", "message": f"node {node.node_id[:12]}: {error}", "transient": True})
            finally:
                node.in_flight -= 1


def node_reply(reply: dict[str, Any]) -> dict[str, Any]:
    """A node's preflight reply as the driver hands it on."""
    return {"kind": "preflight", "fingerprint": reply["fingerprint"], "detail": reply.get("detail", "")}


async def _cancellable(call: Any) -> Any:
    """Awaits a Ray call; cancelled, it cancels the call on its node and
    waits (boundedly) for it to end there: the node's runtime removes the
    run's containers before its call ends."""
    future = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        ray.cancel(call)
        await asyncio.wait({future}, timeout=_CANCEL_GRACE_S)
        if future.done() and not future.cancelled():
            # Read, so that the node's cancellation is not reported as lost.
            future.exception()
        raise


class _Dispatcher:
    """Takes the scorer's requests off the desk (on the loop's thread) and
    sends each to a node; a request its caller stopped waiting for is
    cancelled on its node."""

    def __init__(self, desk: _native.NativeDesk, cluster: _Cluster) -> None:
        self._desk = desk
        self._cluster = cluster
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    def attach(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._desk.fileno(), self._take)

    def _take(self) -> None:
        assert self._loop is not None
        for request_id, request in self._desk.take():
            if request is None:
                task = self._tasks.get(request_id)
                if task is not None:
                    task.cancel()
                continue
            self._tasks[request_id] = self._loop.create_task(self._dispatch(request_id, request))

    async def _dispatch(self, request_id: int, request: str) -> None:
        try:
            reply = await self._cluster.handle(request)
            self._desk.answer(request_id, reply)
        except asyncio.CancelledError:
            pass
        except Exception as error:  # noqa: BLE001 - any fault refuses the request, never a verdict
            self._desk.refuse(request_id, f"progscore.ray: {type(error).__name__}: {error}", True)
        finally:
            self._tasks.pop(request_id, None)

    async def close(self) -> None:
        """Stops taking requests once every one in flight has ended (a
        cancelled one after its cleanup on its node)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)
        if self._loop is not None:
            self._loop.remove_reader(self._desk.fileno())


class RayScorer:
    """Scores programs on a Ray cluster into one store (see the module's
    doc). Use as ``async with RayScorer(config=...) as scorer``."""

    def __init__(
        self,
        *,
        config: Union[str, os.PathLike[str]],
        store: Union[str, os.PathLike[str], None] = None,
        address: Optional[str] = None,
        jobs_per_node: Optional[int] = None,
        node_resource: Optional[str] = None,
    ) -> None:
        self._config = os.fspath(config)
        # The config, the store and the comparators first: what is wrong
        # there is said before the cluster is joined.
        client, desk, store_path = _native.NativeClient.remote_from_config(self._config)
        self._store = _native.NativeStore(os.fspath(store) if store is not None else store_path)
        self._scorer = _native.NativeScorer(client, self._store)
        if not ray.is_initialized():
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING)
        self._cluster = _Cluster(self._config, jobs_per_node, node_resource)
        self._dispatcher = _Dispatcher(desk, self._cluster)

    async def __aenter__(self) -> RayScorer:
        await self._cluster.start()
        self._dispatcher.attach()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._dispatcher.close()
        await self._cluster.stop()

    @property
    def capacity(self) -> int:
        """Programs the cluster's nodes run at once, in all."""
        return self._cluster.capacity

    @property
    def lost_nodes(self) -> dict[str, str]:
        """The nodes lost during this scorer's work (node id: what was seen);
        their programs ran again on the others."""
        return {node.node_id: node.lost for node in self._cluster.nodes if node.lost is not None}

    async def preflight(self, profile: str) -> str:
        """Checks a profile on every node; raises ``SandboxRefusedError``
        when no node can run it."""
        return await _run(lambda waker: self._scorer.start_preflight(waker, profile))

    async def score_item(
        self,
        summary: _native.NativeSummary,
        program: bytes,
        expectation_json: str,
        item_id: str,
        fresh: bool = False,
    ) -> dict[str, Any]:
        """Scores one item; ``{"score": ..., "line": result line}``."""
        result = await _run(
            lambda waker: self._scorer.start_score_item(waker, summary, program, expectation_json, item_id, fresh)
        )
        parsed: dict[str, Any] = json.loads(result)
        return parsed

    async def score_many_async(
        self, items: Iterable[ScoringItem], *, fresh: bool = False
    ) -> list[Union[Score, ProgscoreError]]:
        """As ``ProgramExecutionScorer.score_many_async``, on the cluster."""
        items = list(items)
        gate = asyncio.Semaphore(max(1, self.capacity))
        summary = _native.NativeSummary()

        async def one(index: int, item: ScoringItem) -> Union[Score, ProgscoreError]:
            async with gate:
                try:
                    item_id = item.item_id if item.item_id is not None else str(index)
                    result = await self.score_item(
                        summary, item.scorable._bytes(), item.expectation._json(), item_id, fresh
                    )
                except ProgscoreError as error:
                    return error
                return Score._from_json(result["score"])

        return list(await asyncio.gather(*(one(index, item) for index, item in enumerate(items))))

    async def node_stats(self) -> list[NodeStats]:
        """Each node's runtime's figures (``NodeStats``), lost nodes left out."""
        stats = []
        for node in self._cluster.nodes:
            if node.lost is None:
                try:
                    value = await node.actor.stats.remote()
                except _LOST:
                    continue
                stats.append(NodeStats(**{k: value[k] for k in NodeStats.__dataclass_fields__}))
        return stats


async def score_many_async(
    items: Iterable[ScoringItem],
    *,
    config: Union[str, os.PathLike[str]],
    store: Union[str, os.PathLike[str], None] = None,
    address: Optional[str] = None,
    jobs_per_node: Optional[int] = None,
    node_resource: Optional[str] = None,
    fresh: bool = False,
) -> list[Union[Score, ProgscoreError]]:
    """Scores many programs on the Ray cluster at ``address`` (or the one
    this process already joined), recorded in ``store`` (the config's store
    by default). The results come in the items' order, a refused item as
    its error."""
    async with RayScorer(
        config=config, store=store, address=address, jobs_per_node=jobs_per_node, node_resource=node_resource
    ) as scorer:
        return await scorer.score_many_async(items, fresh=fresh)


def _synchronous(function: Callable[_P, Awaitable[_T]]) -> Callable[_P, _T]:
    """The synchronous twin of an async function: the same parameters, run
    to its end in a new event loop."""

    @functools.wraps(function)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        return asyncio.run(_awaited(function(*args, **kwargs)))

    run.__doc__ = f"The synchronous twin of ``{function.__name__}``."
    return run


async def _awaited(awaitable: Awaitable[_T]) -> _T:
    return await awaitable


score_many = _synchronous(score_many_async)


def stop_runtimes(address: Optional[str] = None) -> int:
    """Ends every progscore node runtime of the cluster (they hold nothing
    between calls; the next driver places them again). Returns how many."""
    if not ray.is_initialized():
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING)
    from ray.util import list_named_actors

    stopped = 0
    for entry in list_named_actors(all_namespaces=True):
        if entry.get("namespace") == NAMESPACE and str(entry.get("name", "")).startswith("progscore-"):
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))
            stopped += 1
    return stopped


# ---------------------------------------------------------------- the command


# The exit statuses this module returns itself (a batch's comes from the runtime).
_EXIT_OK, _EXIT_ERROR = 0, 2


async def _score_batch(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    received: list[signal.Signals] = []
    main = asyncio.current_task()
    assert main is not None

    def interrupted(signum: signal.Signals) -> None:
        if not received:
            received.append(signum)
            main.cancel()

    scorer = RayScorer(
        config=args.config,
        store=args.store,
        address=args.address,
        jobs_per_node=args.jobs_per_node,
        node_resource=args.node_resource,
    )
    # After joining the cluster: ray.init installs its own handlers.
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, interrupted, signum)
    # The runtime's batch driver runs it, as it runs `progscore score`:
    # every profile checked before anything runs, the items streamed from
    # the file, a failed store or a dead engine stopping it once.
    batch = scorer._scorer.survey_batch(os.fspath(args.batch))
    bad_lines = len(batch.bad_lines)
    for line in batch.bad_lines:
        print(f"progscore: {line}", file=sys.stderr)
    if args.strict and bad_lines:
        print(f"progscore: --strict: nothing scored ({bad_lines} bad line(s))", file=sys.stderr)
        return _EXIT_ERROR
    out = open(args.out, "w") if args.out else sys.stdout
    started = time.monotonic()

    async def events() -> None:
        nonlocal bad_lines
        while True:
            event: Optional[dict[str, Any]] = json.loads(await _run(batch.next))
            if event is None:
                return
            kind = event["kind"]
            if kind == "scored":
                out.write(json.dumps(event["line"]) + "\n")
                out.flush()
            elif kind == "profile_refused":
                print(
                    f"progscore: profile `{event['profile']}` cannot run here: {event['error']}\n"
                    f"  {event['items']} item(s) of it not scored; nothing was stored for them",
                    file=sys.stderr,
                )
            elif kind == "not_scored":
                print(f"progscore: item {event['id']}: not scored: {event['error']}", file=sys.stderr)
            elif kind == "failed":
                print(f"progscore: item {event['id']}: {event['error']}", file=sys.stderr)
            elif kind in ("engine_gone", "store_failed"):
                print(f"progscore: {event['error']}", file=sys.stderr)
            elif kind == "bad_line":
                bad_lines += 1
                print(f"progscore: {event['error']}", file=sys.stderr)

    ran = False
    try:
        async with scorer:
            batch.start(max(1, scorer.capacity), args.fresh)
            ran = True
            try:
                await events()
            except asyncio.CancelledError:
                # Items not started end without running; each running one
                # ends after its run's cleanup on its node: its events
                # still come, to the batch's end.
                batch.cancel()
                await events()
    except asyncio.CancelledError:
        pass  # while joining or leaving the cluster
    finally:
        if out is not sys.stdout:
            out.close()
    if not ran:
        print(f"progscore: stopped before anything ran: {batch.items} item(s) not scored", file=sys.stderr)
        return 128 + int(received[0]) if received else _EXIT_ERROR
    counts = batch.counts()
    sys.stderr.write(batch.render(time.monotonic() - started, bad_lines))
    signal_exit = 128 + int(received[0]) if received else None
    not_scored = counts["cancelled"] + counts["not_scored"]
    end = batch.end(signal_exit)
    if end == "interrupted":
        print(
            f"progscore: {received[0].name}: {not_scored} item(s) not scored; their containers were removed. "
            "Run the same command again to continue.",
            file=sys.stderr,
        )
    elif end == "store_failed":
        print(
            f"progscore: stopped: the evidence store failed; {not_scored + counts['errors']} item(s) not scored. "
            "The results written so far stand.",
            file=sys.stderr,
        )
    elif end == "engine_gone":
        print(
            f"progscore: stopped: {not_scored} item(s) not scored (nothing was stored for them; finished results "
            "are). Run the same command again to continue once the engine is back.",
            file=sys.stderr,
        )
    # The same exit status as `progscore score`, from the same policy.
    return batch.exit_status(bad_lines, list(args.fail_on), signal_exit)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m progscore.ray",
        description="progscore on a Ray cluster: the same result lines and summary as `progscore score`.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="score a batch (one JSON item per line) on the cluster")
    score.add_argument("batch", help="the batch file")
    score.add_argument("--address", default=None, help="the Ray cluster (`auto`, or host:port; default: RAY_ADDRESS)")
    score.add_argument(
        "--config",
        default=os.environ.get("PROGSCORE_CONFIG", "progscore.toml"),
        help="progscore.toml (default: PROGSCORE_CONFIG, else ./progscore.toml); every node needs the same profiles",
    )
    score.add_argument("--store", default=None, help="the evidence store (default: the config's)")
    score.add_argument("--out", default=None, help="write result lines here instead of stdout")
    score.add_argument("--fresh", action="store_true", help="run again even where evidence is stored")
    score.add_argument("--strict", action="store_true", help="stop at the first bad line")
    score.add_argument(
        "--jobs-per-node", type=int, default=None, help="programs at once per node (default: 3 per CPU Ray counts)"
    )
    score.add_argument(
        "--node-resource",
        default=None,
        help="only nodes with this Ray resource run programs (e.g. a worker group started with --resources)",
    )
    score.add_argument(
        "--fail-on", action="append", default=[], choices=["false", "undetermined"], help="exit 1 on this verdict"
    )
    stop = commands.add_parser("stop", help="end progscore's node runtimes on the cluster")
    stop.add_argument("--address", default=None)
    args = parser.parse_args(argv)
    try:
        if args.command == "stop":
            print(f"stopped {stop_runtimes(args.address)} node runtime(s)", file=sys.stderr)
            return _EXIT_OK
        if args.jobs_per_node is not None and args.jobs_per_node < 1:
            parser.error("--jobs-per-node must be at least 1")
        return asyncio.run(_score_batch(args))
    except ProgscoreError as error:
        print(f"progscore: {error}", file=sys.stderr)
        return _EXIT_ERROR


if __name__ == "__main__":
    # The package's module, not this __main__ copy: Ray finds the node
    # runtime's class by its importable name.
    from progscore.ray import main as _main

    sys.exit(_main())
