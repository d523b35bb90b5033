// Keeps the live and recent turns of the overview current: the server
// renders the fragment, this only swaps it in while the tab is visible.
(function () {
  "use strict";
  var area = document.getElementById("live-area");
  if (!area) return;
  var url = area.getAttribute("data-refresh");
  var busy = false;
  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { area.innerHTML = html; area.setAttribute("data-updated", String(Date.now())); })
      .catch(function () { /* keep what is shown; try again on the next tick */ })
      .then(function () { busy = false; });
  }
  setInterval(refresh, 3000);
  document.addEventListener("visibilitychange", refresh);
})();
