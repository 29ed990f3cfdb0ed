"""The dashboard: a local web page over the same posttrain.tools functions the MCP server uses.

Server-rendered HTML (Jinja2, autoescaped: completions are model output, never trusted),
inline SVG charts, a few lines of JavaScript for live updates, no build step. It reads only
through the tools: run ids are validated, and no route takes a file path, so nothing outside
the runs home can be read through it. Loopback by default; any other address needs a bearer
token (header, or a cookie set by signing in on /login with a POST form: the token never
travels in a URL), and Host headers are checked. Pages that read the index, the run folders
or Modal are plain functions, which Starlette runs in its thread pool: the event loop never
waits on SQLite, a file or the network.
"""

from __future__ import annotations

import hmac
import logging
import traceback
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

from posttrain.core.errors import ConfigError, NotFoundError, PosttrainError
from posttrain.core.formatting import ago, clock, num
from posttrain.core.net import is_loopback
from posttrain.core.secrets import redact
from posttrain.dashboard.charts import metric_series, png_chart, svg_chart
from posttrain.runs.context import Context
from posttrain.runs.layout import FINAL_STATUSES
from posttrain.tools import runs as tools
from posttrain.tools.experiments import experiment_view

log = logging.getLogger("posttrain.dashboard")
TOKEN_ENV = "POSTTRAIN_DASHBOARD_TOKEN"
COOKIE = "posttrain_token"
TEMPLATES = Path(__file__).parent / "templates"
MAX_N = 64


def reward_charts(
    metrics: list[dict[str, Any]], heldout: list[dict[str, Any]] | None = None
) -> dict[str, str]:
    components = sorted({k for m in metrics for k in (m.get("components") or {})})
    headline = [c for c in ("rhyme", "relevance") if c in components] or components[:3]
    rewards = metric_series(metrics, "reward", *(f"components.{c}" for c in headline))
    if heldout:  # algorithm.eval_every: the reward on held-out prompts, beside the training one
        rewards["held-out reward"] = metric_series(heldout, "reward")["reward"]
    return {
        "reward": svg_chart(
            rewards,
            "reward per step (and components)"
            + ("; held-out every eval_every steps" if heldout else ""),
            chart_id="reward-chart",
        ),
        "loss": svg_chart(metric_series(metrics, "loss"), "loss", chart_id="loss-chart"),
        "kl": svg_chart(metric_series(metrics, "kl"), "KL to the reference", chart_id="kl-chart"),
        "length": svg_chart(
            metric_series(metrics, "completion_length"),
            "completion length (tokens)",
            chart_id="length-chart",
        ),
    }


def build_app(
    ctx: Context | None = None, token: str | None = None, allowed_hosts: list[str] | None = None
) -> Starlette:
    rc = ctx or Context()
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape())
    env.globals.update(fmt=num, ago=ago, time=clock)

    def page(name: str, code: int = 200, **values: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**values), status_code=code)

    def status_filter(request: Request) -> str | None:
        status = request.query_params.get("status") or None
        if status in (None, "all"):
            return None
        if status not in ("queued", "running", "stalled", *FINAL_STATUSES):
            raise ConfigError(f"unknown status filter '{status}'")
        return status

    def runs_page(request: Request) -> Response:
        status = status_filter(request)
        return page("runs.html", runs=tools.list_runs(status, ctx=rc), status=status)

    def runs_fragment(request: Request) -> Response:
        status = status_filter(request)
        return page("run_rows.html", runs=tools.list_runs(status, ctx=rc), status=status)

    def summary_values(run_id: str) -> dict[str, Any]:
        detail = tools.get_run(run_id, verbose=True, ctx=rc)
        return {
            "d": detail,
            "charts": reward_charts(detail.metrics or [], detail.heldout),
            "stages": tools.stage_timeline(run_id, ctx=rc),
        }

    def run_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        values = summary_values(run_id)
        query = request.query_params
        order = query.get("order") if query.get("order") in ("best", "worst", "random") else "best"
        try:
            n = max(1, min(int(query.get("n") or 4), MAX_N))
        except ValueError:
            n = 4
        traces: list[tuple[int, list[Any]]] = []
        late = None
        steps = rc.index.trace_steps(run_id)
        if steps:  # an early step beside the chosen (default: the latest) one
            wanted = query.get("step") or ""
            late = int(wanted) if wanted.isdigit() and int(wanted) in steps else steps[-1]
            found = tools.sample_traces(run_id, sorted({steps[0], late}), n, order, ctx=rc)  # type: ignore[arg-type]
            traces = sorted(found.steps.items())
        q = (query.get("q") or "").strip()[:200] or None
        logs = tools.tail_logs(run_id, tail=300, search=q, ctx=rc).lines
        return page(
            "run.html",
            **values,
            traces=traces,
            trace_steps=steps,
            late_step=late,
            order=order,
            n=n,
            q=q,
            logs=logs,
            evaluation=tools.latest_evaluation(run_id, ctx=rc),
            live=values["d"].status not in FINAL_STATUSES,
        )

    def experiment_page(request: Request) -> Response:
        view = experiment_view(request.path_params["experiment_id"], rc)
        curves: dict[str, list[tuple[int, float]]] = {}
        bands = {}
        for arm in view.arms:  # one curve an arm: the seeds' mean by step, their range shaded
            by_step: dict[int, list[float]] = {}
            for run in arm.runs:
                metrics = tools.get_run(run.run_id, verbose=True, ctx=rc).metrics or []
                for step, value in metric_series(metrics, "reward")["reward"]:
                    by_step.setdefault(step, []).append(value)
            steps = sorted(by_step)
            curves[arm.name] = [(s, sum(by_step[s]) / len(by_step[s])) for s in steps]
            bands[arm.name] = (
                [(s, min(by_step[s])) for s in steps],
                [(s, max(by_step[s])) for s in steps],
            )
        chart = svg_chart(
            curves, "reward per step: each arm's seeds (mean, range)", chart_id="arms-chart",
            bands=bands,
        )  # fmt: skip
        live = any(r.status not in FINAL_STATUSES for a in view.arms for r in a.runs)
        return page("experiment.html", e=view, chart=chart, c=view.comparison, live=live)

    def summary_fragment(request: Request) -> Response:
        return page("run_summary.html", **summary_values(request.path_params["run_id"]))

    def api_runs(request: Request) -> Response:
        runs = tools.list_runs(status_filter(request), ctx=rc)
        return JSONResponse([r.model_dump(mode="json") for r in runs])

    def api_run(request: Request) -> Response:
        detail = tools.get_run(request.path_params["run_id"], verbose=True, ctx=rc)
        return JSONResponse(detail.model_dump(mode="json"))

    def reward_png(request: Request) -> Response:
        detail = tools.get_run(request.path_params["run_id"], verbose=True, ctx=rc)
        image = png_chart(
            metric_series(detail.metrics or [], "reward"), f"{detail.run_id}: reward per step"
        )
        return Response(image, media_type="image/png")

    def login_form(request: Request) -> Response:
        return page("login.html", failed=False)

    async def login(request: Request) -> Response:
        given = str((await request.form()).get("token") or "")
        if not (token and hmac.compare_digest(given.encode(), token.encode())):
            return page("login.html", code=401, failed=True)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
        return response

    async def not_found(request: Request, exc: Exception) -> Response:
        return page(
            "error.html",
            code=404,
            title="Not found",
            message=redact(str(exc)) if isinstance(exc, PosttrainError) else "No such page.",
        )

    async def failed(request: Request, exc: Exception) -> Response:
        log.error("dashboard page %s failed:\n%s", request.url.path, traceback.format_exc())
        return page(
            "error.html",
            code=500,
            title="Something went wrong",
            message=f"{type(exc).__name__}: the dashboard could not render this page; "
            f"its log has the details",
        )

    routes = [
        Route("/", runs_page),
        Route("/fragments/runs", runs_fragment),
        Route("/runs/{run_id}", run_page),
        Route("/experiments/{experiment_id}", experiment_page),
        Route("/fragments/runs/{run_id}/summary", summary_fragment),
        Route("/runs/{run_id}/reward.png", reward_png),
        Route("/api/runs", api_runs),
        Route("/api/runs/{run_id}", api_run),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
    ]
    handlers = {404: not_found, NotFoundError: not_found, ConfigError: not_found, Exception: failed}
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or ["127.0.0.1", "localhost"])
    ]
    app = Starlette(routes=routes, exception_handlers=handlers, middleware=middleware)
    return BearerOrCookie(app, token) if token else app


class BearerOrCookie:
    """Every request needs the token: an Authorization header, or the cookie /login sets."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") != "/login":
            connection = HTTPConnection(scope)
            bearer = connection.headers.get("authorization", "").removeprefix("Bearer ")
            cookie = connection.cookies.get(COOKIE, "")
            if not (
                hmac.compare_digest(bearer.encode(), self.token)
                or hmac.compare_digest(cookie.encode(), self.token)
            ):
                response = PlainTextResponse(
                    "401: this dashboard needs its token (sign in at /login)", status_code=401
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def serve(host: str, port: int, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to serve the dashboard on {host}, which is not loopback, without a "
            f"token: set {TOKEN_ENV} to a long random secret, or bind 127.0.0.1"
        )
    import uvicorn  # after the refusal, which must not wait on it

    hosts = ["127.0.0.1", "localhost", host]  # Host headers are compared without the port
    uvicorn.run(
        build_app(token=token, allowed_hosts=hosts), host=host, port=port, log_level="warning"
    )
