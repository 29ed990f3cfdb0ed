"""The dashboard's experiment page in a real headless Chromium: from the runs list to the
experiment, one curve an arm with its seeds' range shaded, and the comparison table with the
verdict evaluate stored. Real tiny runs, a real evaluation."""

import pytest

from posttrain.tools.evaluate import evaluate
from posttrain.tools.launch import launch
from tests.conftest import kill_leftover_runs, wait_finished
from tests.dashboard.conftest import dashboard
from tests.dashboard.test_dashboard import CHROMIUM, FLAGS
from tests.specs import EVAL_RUN

pytestmark = pytest.mark.slow

EXPERIMENT = {
    **EVAL_RUN,
    "algorithm": {**EVAL_RUN["algorithm"], "warmstart": None, "steps": 4},
    "sweep": {"algorithm.learning_rate": [5e-4, 0.0], "seeds": [0, 1]},
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("home")
        mp.setenv("POSTTRAIN_HOME", str(home))
        started = launch(EXPERIMENT)
        try:
            for run_id in started.run_ids:
                assert wait_finished(run_id, 600).status == "succeeded"
        finally:
            kill_leftover_runs(home)
        compared = evaluate(started.group_id, k=1, base_passes=2, max_tasks=20).experiment
        with dashboard(home) as url:
            yield url, started, compared


def test_a_supervisor_follows_an_experiment_from_the_runs_list_to_its_comparison(site, tmp_path):
    from playwright.sync_api import sync_playwright

    url, started, compared = site
    experiment = started.group_id
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/")
        page.locator(f"a[href='/experiments/{experiment}']").first.click()
        page.wait_for_selector("#arms-chart")
        arms = ["learning_rate=0.0005", "learning_rate=0"]
        rows = page.locator("#arm-table tbody tr")
        assert [rows.nth(i).get_attribute("data-arm") for i in range(rows.count())] == arms
        assert all(rows.nth(i).inner_text().count("succeeded") == 2 for i in range(2))
        curves = page.locator("#arms-chart polyline.series")
        assert sorted(curves.nth(i).get_attribute("data-name") for i in range(2)) == sorted(arms)
        assert page.locator("#arms-chart polygon.band").count() == 2  # each arm's seeds
        assert page.locator("#arms-chart circle.pt").count() == 4  # the first arm's 4 steps
        assert page.locator("#exp-verdict").inner_text() == compared.verdict
        table = page.locator("#compare-table tbody tr")
        ranked = [table.nth(i).get_attribute("data-arm") for i in range(table.count())]
        assert ranked == [a.arm for a in compared.arms]
        behind = table.nth(1).inner_text()
        assert ("yes" if compared.arms[1].vs_best.beyond_noise else "no") in behind.split()
        page.screenshot(path=str(tmp_path / "experiment.png"), full_page=True)
        browser.close()
    assert (tmp_path / "experiment.png").stat().st_size > 10_000
