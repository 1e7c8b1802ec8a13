"""The web console in a real browser: headless Chromium (Debian's `chromium` and
`chromium-driver`) driven by selenium, against three `strata` nodes, each serving its
console (`console.listener`).

It loads every page, then clicks through what an operator does: creates a topic from the
topics page, produces to it with kcat, finds one record by a substring of its value with
the search (its progress ends in "done"), watches a consumer group's lag fall as a consumer
reads and commits, and resets the group's offsets to the earliest. What each page shows is
checked against what the admin APIs say through confluent-kafka. Screenshots of every step
go to target/console-screenshots/ (the ones that explain the console are in docs/images/).
"""

import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from conftest import Cluster, free_port

SHOTS = Path(__file__).resolve().parents[2] / "target" / "console-screenshots"
TOPIC = "browser-topic"
GROUP = "browser-group"
WAIT_S = 30


def chromium() -> webdriver.Chrome:
    binary = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    assert binary and driver, "install Debian's chromium and chromium-driver (./test.sh does)"
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)


@pytest.fixture
def consoles(tmp_path):
    ports = {i: free_port() for i in (1, 2, 3)}
    c = Cluster(
        tmp_path,
        3,
        {"offsets.topic.num.partitions": "3"},
        node_settings=lambda i: {"console.listener": f"http://127.0.0.1:{ports[i]}"},
    )
    try:
        c.wait_registered()
        yield c, ports
    finally:
        c.kill()


def shot(driver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def until(driver, what: str, check, timeout: float = WAIT_S):
    return WebDriverWait(
        driver,
        timeout,
        poll_frequency=0.5,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    ).until(
        lambda d: check(d), message=what
    )


def cell_texts(driver, table_id: str) -> list[list[str]]:
    # An empty table holds one placeholder row ("none"), which is no row of data.
    rows = driver.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr")
    cells = [r.find_elements(By.TAG_NAME, "td") for r in rows]
    return [
        [td.text for td in r]
        for r in cells
        if not (len(r) == 1 and "empty" in (r[0].get_attribute("class") or ""))
    ]


def committed(bootstrap: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        got = c.committed([TopicPartition(TOPIC, p) for p in range(partitions)], timeout=WAIT_S)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def consume_and_commit(bootstrap: str, count: int) -> None:
    """A member of the group reads `count` records of partition 0 from where the group is,
    commits, and leaves."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": GROUP,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    c.assign([TopicPartition(TOPIC, 0)])
    read = 0
    deadline = time.monotonic() + WAIT_S
    last = None
    while read < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            read += 1
            last = m
    assert read == count, f"read {read} of {count}"
    c.commit(message=last, asynchronous=False)
    c.close()


def test_the_console_in_a_browser(consoles):
    cluster, ports = consoles
    bootstrap = cluster.bootstrap()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    base = f"http://127.0.0.1:{ports[2]}"
    driver = chromium()
    try:
        # Every page loads.
        for path, title in [("/", "Overview"), ("/topics", "Topics"), ("/groups", "Consumer groups"),
                            ("/hot", "Hot partitions"), ("/messages", "Messages"),
                            ("/transactions", "Transactions"), ("/security", "Security")]:
            driver.get(base + path)
            assert driver.find_element(By.TAG_NAME, "h1").text == title, path
            assert not driver.find_elements(By.ID, "error"), path
        # The overview against Metadata: three brokers alive, the controller named.
        driver.get(base + "/")
        until(driver, "three brokers alive",
              lambda d: sum("alive" in r[3] for r in cell_texts(d, "brokers")) == 3 or d.refresh())
        md = admin.list_topics(timeout=WAIT_S)
        assert driver.find_element(By.ID, "controller").text == str(md.controller_id)
        assert sorted(int(r[0]) for r in cell_texts(driver, "brokers")) == sorted(md.brokers)
        shot(driver, "overview")

        # Create a topic from the topics page.
        driver.get(base + "/topics")
        form = driver.find_element(By.ID, "create-topic")
        form.find_element(By.NAME, "name").send_keys(TOPIC)
        for name, value in (("partitions", "3"), ("replication_factor", "3")):
            field = form.find_element(By.NAME, name)
            field.clear()
            field.send_keys(value)
        form.find_element(By.TAG_NAME, "button").click()
        until(driver, "the creation confirmed",
              lambda d: "Done" in d.find_element(By.ID, "flash").text
              or ("error" in d.find_element(By.ID, "flash").get_attribute("class") and
                  pytest.fail(d.find_element(By.ID, "flash").text)))
        deadline = time.monotonic() + WAIT_S
        while True:
            t = admin.list_topics(TOPIC, timeout=WAIT_S).topics.get(TOPIC)
            if t is not None and t.error is None and len(t.partitions) == 3:
                break
            assert time.monotonic() < deadline, "the topic the console created"
            time.sleep(0.2)
        assert all(len(p.replicas) == 3 for p in t.partitions.values())

        # Produce with kcat, then find one record by a substring of its value.
        lines = "".join(f"key-{i}:value number {i}{' find-me-7' if i == 77 else ''}\n" for i in range(120))
        subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", TOPIC, "-p", "0", "-K:"],
                       input=lines.encode(), check=True, timeout=WAIT_S)
        driver.get(f"{base}/topics/{TOPIC}")
        until(driver, "120 records in partition 0",
              lambda d: any(r[0] == "0" and r[5] == "120" for r in cell_texts(d, "partitions")) or d.refresh())
        shot(driver, "topic")
        driver.get(f"{base}/messages?topic={TOPIC}&partition=0")
        search = driver.find_element(By.ID, "search-form")
        search.find_element(By.NAME, "value").send_keys("find-me-7")
        search.find_element(By.TAG_NAME, "button").click()
        until(driver, "the search done", lambda d: "done" in d.find_element(By.ID, "search-progress").text)
        found = cell_texts(driver, "search-results")
        assert len(found) == 1 and found[0][0] == "77", found
        assert "find-me-7" in found[0][3] and found[0][2] == "key-77", found
        shot(driver, "search")

        # The group's lag falls as it consumes.
        consume_and_commit(bootstrap, 40)
        driver.get(f"{base}/groups/{GROUP}")
        assert driver.find_element(By.ID, "total-lag").text == "80"
        assert committed(bootstrap, 1)[0] == 40
        consume_and_commit(bootstrap, 50)
        driver.get(f"{base}/groups/{GROUP}")
        until(driver, "the lag fallen to 30",
              lambda d: d.find_element(By.ID, "total-lag").text == "30" or d.refresh())
        until(driver, "the lag's trend, once two points are known",
              lambda d: d.find_elements(By.ID, "lag-trend") or d.refresh())
        shot(driver, "group")

        # Reset the (empty) group to the earliest offsets.
        form = driver.find_element(By.ID, "reset-offsets")
        Select(form.find_element(By.NAME, "to")).select_by_visible_text("earliest")
        form.find_element(By.TAG_NAME, "button").click()
        until(driver, "the reset confirmed", lambda d: "Done" in d.find_element(By.ID, "flash").text)
        until(driver, "the lag back to 120",
              lambda d: d.find_element(By.ID, "total-lag").text == "120" or d.refresh())
        assert committed(bootstrap, 1)[0] == 0

        # Hot partitions: a producer sends nine records in ten to partition 0 while the
        # console samples; partition 0 ranks first and its topic is judged hot.
        stop = threading.Event()

        def skewed() -> None:
            p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            i = 0
            while not stop.is_set():
                p.produce(TOPIC, value=b"x" * 200, partition=0 if i % 10 else 1 + (i // 10) % 2)
                i += 1
                if i % 100 == 0:
                    p.poll(0)
                    time.sleep(0.02)
            p.flush(WAIT_S)

        producing = threading.Thread(target=skewed)
        producing.start()
        try:
            driver.get(base + "/hot")

            def ranked(d):
                rows = cell_texts(d, "hot")
                verdicts = cell_texts(d, "verdicts")
                return (rows and rows[0][1] == "0" and float(rows[0][3]) > 0
                        and any(v[0] == TOPIC and v[1] == "hot" for v in verdicts)) or d.refresh()

            until(driver, "partition 0 hot", ranked, 90)
            shot(driver, "hot")
        finally:
            stop.set()
            producing.join()
    finally:
        driver.quit()
