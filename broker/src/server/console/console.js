// Strata console: the forms send their fields as JSON to the endpoint they name, the search
// runs in bounded steps and shows its progress, and a page with data-refresh reloads itself.
"use strict";

function flash(text, bad) {
  const f = document.getElementById("flash");
  if (!f) return;
  f.textContent = text;
  f.className = bad ? "flash error" : "flash ok";
  f.hidden = false;
}

function fieldsOf(form) {
  const body = {};
  for (const el of form.elements) {
    if (!el.name) continue;
    const v = el.value.trim();
    if (el.type === "number") {
      if (v !== "") body[el.name] = Number(v);
    } else if (el.name === "value" && v === "" && form.id === "alter-config") {
      body[el.name] = null;
    } else if (v !== "") {
      body[el.name] = v;
    }
  }
  return body;
}

async function send(method, url, body) {
  const r = await fetch(url, {
    method: method,
    headers: { "Content-Type": "application/json", "X-Strata-Console": "1" },
    body: method === "DELETE" ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  let answer = {};
  try { answer = await r.json(); } catch (e) { answer = { error: "HTTP " + r.status }; }
  if (!r.ok) throw new Error(answer.error || ("HTTP " + r.status));
  return answer;
}

function wireForms() {
  for (const form of document.querySelectorAll("form.action")) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const question = form.dataset.confirm;
      if (question && !window.confirm(question)) return;
      const button = form.querySelector("button");
      if (button) button.disabled = true;
      try {
        const answer = await send(form.dataset.method, form.dataset.url, fieldsOf(form));
        flash("Done: " + JSON.stringify(answer), false);
        if (form.dataset.then) {
          window.location.href = form.dataset.then;
        } else {
          setTimeout(() => window.location.reload(), 800);
        }
      } catch (e) {
        flash(e.message, true);
      } finally {
        if (button) button.disabled = false;
      }
    });
  }
}

function cell(row, text, cls) {
  const td = document.createElement("td");
  if (cls !== undefined) {
    const pre = document.createElement("pre");
    pre.className = cls;
    pre.textContent = text;
    td.appendChild(pre);
  } else {
    td.textContent = text;
  }
  row.appendChild(td);
}

function shown(v) {
  return v === null ? ["null", "null"] : [v.text, v.as];
}

function addMatches(tbody, matches) {
  for (const m of matches) {
    const tr = document.createElement("tr");
    cell(tr, String(m.offset));
    cell(tr, m.timestamp >= 0 ? new Date(m.timestamp).toISOString().replace("T", " ").replace("Z", "") : String(m.timestamp));
    const k = shown(m.key);
    cell(tr, k[0], k[1]);
    const v = shown(m.value);
    cell(tr, v[0], v[1]);
    cell(tr, m.headers.map((h) => h.key + "=" + (h.value ? h.value.text : "null")).join("\n"));
    tbody.appendChild(tr);
  }
}

function wireSearch() {
  const form = document.getElementById("search-form");
  const browse = document.getElementById("browse-form");
  if (!form || !browse) return;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const params = new URLSearchParams();
    for (const el of browse.elements) {
      if (el.name && el.value.trim() !== "") params.set(el.name, el.value.trim());
    }
    for (const el of form.elements) {
      if (el.name && el.name !== "budget_mib" && el.value.trim() !== "") params.set(el.name, el.value.trim());
    }
    const budget = Number(form.elements.budget_mib.value || "1024") * 1048576;
    const progress = document.getElementById("search-progress");
    const bar = document.getElementById("search-bar");
    const tbody = document.querySelector("#search-results tbody");
    tbody.textContent = "";
    bar.hidden = false;
    let scanned = 0, found = 0, first = null;
    const button = form.querySelector("button");
    button.disabled = true;
    try {
      for (;;) {
        const r = await fetch("/api/search?" + params.toString(), { credentials: "same-origin" });
        const a = await r.json();
        if (!r.ok) throw new Error(a.error || ("HTTP " + r.status));
        if (first === null) first = a.start_offset;
        scanned += a.scanned_bytes;
        found += a.matches.length;
        addMatches(tbody, a.matches);
        const span = Math.max(1, a.log_end_offset - first);
        bar.value = Math.min(1, (a.next_offset - first) / span);
        progress.textContent = `${found} found · scanned ${(scanned / 1048576).toFixed(1)} MiB, offsets ${first} to ${a.next_offset} of ${a.log_end_offset}` +
          (a.done ? " · done" : "");
        if (a.done || scanned >= budget) {
          if (!a.done) progress.textContent += " · stopped at the scan budget";
          break;
        }
        params.delete("timestamp");
        params.delete("from_ms_start");
        params.set("offset", String(a.next_offset));
      }
    } catch (e) {
      progress.textContent = "Search failed: " + e.message;
      progress.className = "error";
    } finally {
      button.disabled = false;
    }
  });
}

function wireRefresh() {
  const secs = Number(document.body.dataset.refresh || "0");
  if (secs > 0 && !document.querySelector("form.action, #search-form")) {
    setTimeout(() => window.location.reload(), secs * 1000);
  } else if (secs > 0) {
    // Pages with forms refresh only while nothing is being typed.
    setInterval(() => {
      const active = document.activeElement;
      if (!active || active === document.body) window.location.reload();
    }, secs * 1000);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  wireForms();
  wireSearch();
  wireRefresh();
});
