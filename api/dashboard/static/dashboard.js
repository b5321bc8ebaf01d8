// slaplan dashboard: progressive enhancement. Every page works without this file; it adds
// self-refresh while work is in progress, sortable tables, tabs, copy buttons, client-side
// text filtering and the submit form.
"use strict";

(function () {
  const REFRESH_MS = 2000;

  function enhance(root) {
    root.querySelectorAll("table[data-sortable]").forEach(sortable);
    root.querySelectorAll("[data-tabs]").forEach(tabs);
    root.querySelectorAll("button.copy").forEach(copyButton);
    root.querySelectorAll("form[data-autosubmit] input[type=checkbox]").forEach(submitOnChange);
  }

  function submitOnChange(box) {
    if (box.dataset.enhanced) return;
    box.dataset.enhanced = "1";
    box.addEventListener("change", function () { box.form.submit(); });
  }

  // ---------------------------------------------------------------- sortable tables
  function cellValue(row, index, numeric) {
    const cell = row.children[index];
    if (!cell) return numeric ? -Infinity : "";
    const raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    if (!numeric) return raw.toLowerCase();
    const x = parseFloat(String(raw).replace(/[, ]/g, ""));
    return Number.isFinite(x) ? x : -Infinity;
  }

  function sortable(table) {
    if (table.dataset.enhanced) return;
    table.dataset.enhanced = "1";
    const heads = Array.from(table.tHead ? table.tHead.rows[0].cells : []);
    heads.forEach(function (th, index) {
      let button = th.querySelector("button.sort");
      if (!button) {
        button = document.createElement("button");
        button.type = "button";
        button.className = "sort";
        button.dataset.type = th.classList.contains("n") ? "num" : "text";
        button.textContent = th.textContent;
        th.textContent = "";
        th.appendChild(button);
        th.setAttribute("aria-sort", "none");
      }
      button.addEventListener("click", function () {
        const ascending = th.getAttribute("aria-sort") !== "ascending";
        heads.forEach(function (other) { other.setAttribute("aria-sort", "none"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        const numeric = button.dataset.type === "num";
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        rows.sort(function (a, b) {
          const x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
          const order = x < y ? -1 : x > y ? 1 : 0;
          return ascending ? order : -order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }

  // ---------------------------------------------------------------- tabs
  function tabs(box) {
    if (box.dataset.enhanced) return;
    box.dataset.enhanced = "1";
    box.classList.add("js");
    const list = Array.from(box.querySelectorAll("[role=tab]"));
    function select(tab, focus) {
      list.forEach(function (t) {
        const on = t === tab;
        t.setAttribute("aria-selected", on ? "true" : "false");
        t.tabIndex = on ? 0 : -1;
        document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
      });
      if (focus) tab.focus();
    }
    list.forEach(function (tab, i) {
      tab.addEventListener("click", function () { select(tab, false); });
      tab.addEventListener("keydown", function (e) {
        let next = null;
        if (e.key === "ArrowRight") next = list[(i + 1) % list.length];
        else if (e.key === "ArrowLeft") next = list[(i - 1 + list.length) % list.length];
        else if (e.key === "Home") next = list[0];
        else if (e.key === "End") next = list[list.length - 1];
        if (next) { e.preventDefault(); select(next, true); }
      });
    });
  }

  // ---------------------------------------------------------------- copy
  function copyButton(button) {
    if (button.dataset.enhanced) return;
    button.dataset.enhanced = "1";
    button.addEventListener("click", function () {
      const code = document.getElementById(button.dataset.copy);
      const status = button.parentElement.querySelector(".copied");
      const text = code ? code.textContent : "";
      function done(ok) { if (status) status.textContent = ok ? "Copied to the clipboard." : "Select the text and copy it by hand."; }
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(fallbackCopy(code)); });
      } else {
        done(fallbackCopy(code));
      }
    });
  }

  function fallbackCopy(code) {
    if (!code) return false;
    const range = document.createRange();
    range.selectNodeContents(code);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try { return document.execCommand("copy"); } catch (e) { return false; }
  }

  // ---------------------------------------------------------------- live refresh
  let timer = null;
  function scheduleRefresh() {
    if (timer || !document.querySelector("[data-live]")) return;
    timer = setTimeout(refresh, REFRESH_MS);
  }

  function refresh() {
    timer = null;
    if (document.hidden) { document.addEventListener("visibilitychange", scheduleRefresh, { once: true }); return; }
    fetch(window.location.href, { cache: "no-store", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (text) {
        const fresh = new DOMParser().parseFromString(text, "text/html");
        ["live", "meta"].forEach(function (id) {
          const now = document.getElementById(id), next = fresh.getElementById(id);
          if (now && next) {
            now.replaceWith(next);
            enhance(next);
          }
        });
        const meta = document.querySelector(".title-meta"), freshMeta = fresh.querySelector(".title-meta");
        if (meta && freshMeta) meta.innerHTML = freshMeta.innerHTML;
        applyTextFilter();
      })
      .catch(function () { /* the server may be restarting: try again later */ })
      .finally(scheduleRefresh);
  }

  // ---------------------------------------------------------------- home filters
  function applyTextFilter() {
    const input = document.getElementById("f-text");
    const table = document.querySelector("#live table.list");
    if (!input || !table) return;
    const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    Array.from(table.tBodies[0].rows).forEach(function (row) {
      const text = row.textContent.toLowerCase();
      row.hidden = !words.every(function (w) { return text.indexOf(w) >= 0; });
    });
  }

  function filters() {
    const form = document.querySelector("form[data-autosubmit]");
    if (!form) return;
    form.querySelectorAll("select").forEach(function (select) {
      select.addEventListener("change", function () { form.submit(); });
    });
    const input = document.getElementById("f-text");
    if (input) input.addEventListener("input", applyTextFilter);
  }

  // ---------------------------------------------------------------- submit form
  function submitForm() {
    const form = document.getElementById("submit-form");
    if (!form) return;
    const area = document.getElementById("manifest");
    const errors = document.getElementById("errors");
    const status = document.getElementById("submit-status");
    const button = document.getElementById("submit-button");
    const examples = JSON.parse(document.getElementById("examples").textContent);

    document.querySelectorAll("[data-example]").forEach(function (b) {
      b.addEventListener("click", function () { area.value = examples[b.dataset.example]; clearErrors(); area.focus(); });
    });
    document.getElementById("file").addEventListener("change", function (e) {
      const file = e.target.files && e.target.files[0];
      if (!file) return;
      file.text().then(function (text) { area.value = text; clearErrors(); status.textContent = "Loaded " + file.name + "."; });
    });

    function clearErrors() {
      errors.hidden = true;
      errors.textContent = "";
      area.removeAttribute("aria-invalid");
    }

    function goToLine(line) {
      const lines = area.value.split("\n");
      let start = 0;
      for (let i = 0; i < line - 1 && i < lines.length; i++) start += lines[i].length + 1;
      area.focus();
      area.setSelectionRange(start, start + (lines[line - 1] || "").length);
      const lineHeight = parseFloat(getComputedStyle(area).lineHeight) || 18;
      area.scrollTop = Math.max(0, (line - 3) * lineHeight);
    }

    function showErrors(doc) {
      errors.textContent = "";
      const title = document.createElement("h2");
      title.textContent = doc.message || "The request was not accepted.";
      errors.appendChild(title);
      const causes = doc.causes || [];
      const list = document.createElement("ul");
      causes.forEach(function (c) {
        const item = document.createElement("li");
        item.className = "cause";
        const text = (c.field ? c.field + ": " : "") + c.message;
        if (c.line) {
          const link = document.createElement("button");
          link.type = "button";
          link.className = "link";
          link.textContent = "line " + c.line;
          link.addEventListener("click", function () { goToLine(c.line); });
          item.appendChild(link);
          item.appendChild(document.createTextNode(" — " + text));
        } else {
          item.textContent = text;
        }
        list.appendChild(item);
      });
      if (causes.length) errors.appendChild(list);
      // The manifest again, with each message next to the line of its field.
      const byLine = {};
      causes.forEach(function (c) { if (c.line) (byLine[c.line] = byLine[c.line] || []).push(c); });
      if (Object.keys(byLine).length) {
        const listing = document.createElement("ol");
        listing.className = "annotated";
        listing.setAttribute("aria-label", "The manifest with each error next to its field");
        area.value.split("\n").forEach(function (text, i) {
          const row = document.createElement("li");
          const ln = document.createElement("span"); ln.className = "ln"; ln.textContent = String(i + 1);
          const code = document.createElement("span"); code.className = "src"; code.textContent = text || " ";
          const note = document.createElement("span");
          row.appendChild(ln); row.appendChild(code); row.appendChild(note);
          const here = byLine[i + 1];
          if (here) {
            row.className = "has-error";
            row.dataset.line = String(i + 1);
            note.className = "field-error";
            note.textContent = here.map(function (c) { return (c.field ? c.field + ": " : "") + c.message; }).join("; ");
          }
          listing.appendChild(row);
        });
        errors.appendChild(listing);
      }
      errors.hidden = false;
      area.setAttribute("aria-invalid", "true");
    }

    form.addEventListener("submit", function (e) {
      e.preventDefault();
      clearErrors();
      button.disabled = true;
      status.textContent = "Submitting…";
      const headers = { "Content-Type": "application/yaml", "X-CSRF-Token": document.getElementById("csrf").value };
      const token = document.getElementById("token");
      if (token && token.value) headers["Authorization"] = "Bearer " + token.value;
      fetch("/ui/submit", { method: "POST", headers: headers, body: area.value })
        .then(function (r) {
          return r.json().catch(function () { return { message: "The server answered " + r.status + "." }; })
            .then(function (doc) { return { ok: r.ok, status: r.status, doc: doc }; });
        })
        .then(function (res) {
          if (res.ok && res.doc.accepted && res.doc.href) {
            status.textContent = "Accepted. Opening " + res.doc.name + "…";
            window.location.assign(res.doc.href);
            return;
          }
          if (res.status === 401 || res.doc.code === 401) res.doc = { message: "This server needs an API token to create objects.", causes: [] };
          status.textContent = "";
          showErrors(res.doc);
          button.disabled = false;
        })
        .catch(function () {
          status.textContent = "";
          showErrors({ message: "Could not reach the server. Try again.", causes: [] });
          button.disabled = false;
        });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    enhance(document);
    filters();
    applyTextFilter();
    submitForm();
    scheduleRefresh();
  });
})();
