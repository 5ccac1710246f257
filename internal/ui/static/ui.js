// The provenance explorer's one script: a click (or Enter) on a span of
// the rendered prompt loads its record — the item version as it was, the
// rule that fired, its rank and tokens — into the side panel.
(function () {
  "use strict";

  function show(panel, html) {
    panel.innerHTML = html; // server-rendered and escaped by html/template
  }

  function load(span) {
    var pre = document.getElementById("rendered");
    var panel = document.getElementById("detail");
    if (!pre || !panel) {
      return;
    }
    var spans = pre.querySelectorAll("[data-span].selected");
    for (var i = 0; i < spans.length; i++) {
      spans[i].classList.remove("selected");
    }
    span.classList.add("selected");
    panel.setAttribute("data-loading", span.getAttribute("data-record"));
    var url = pre.getAttribute("data-record-url") + "?subject=" + encodeURIComponent(span.getAttribute("data-record"));
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (res) {
        if (res.redirected || !res.ok) {
          return "<p class=\"error\">The record could not be loaded (" + res.status + "); reload the page, or sign in again.</p>";
        }
        return res.text();
      })
      .then(function (html) {
        show(panel, html);
        panel.removeAttribute("data-loading");
        panel.setAttribute("data-shown", span.getAttribute("data-record"));
      })
      .catch(function () {
        show(panel, "<p class=\"error\">The server could not be reached.</p>");
        panel.removeAttribute("data-loading");
      });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var pre = document.getElementById("rendered");
    if (!pre) {
      return;
    }
    pre.addEventListener("click", function (ev) {
      var span = ev.target.closest("[data-span]");
      if (span) {
        load(span);
      }
    });
    pre.addEventListener("keydown", function (ev) {
      var span = ev.target.closest("[data-span]");
      if (span && (ev.key === "Enter" || ev.key === " ")) {
        ev.preventDefault();
        load(span);
      }
    });
  });
})();
