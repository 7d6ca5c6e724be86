// Keeps the pending list current: polls the server-rendered fragment and swaps it in when the set
// of pending requests changes (never while the approver is typing a reason).
(function () {
  "use strict";
  var token = document.getElementById("token");
  if (token && location.hash.indexOf("#token=") === 0) {
    token.value = decodeURIComponent(location.hash.slice(7));
    history.replaceState(null, "", location.pathname);
  }
  if (!document.getElementById("pending")) return;
  function refresh() {
    fetch("/ui/pending", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var holder = document.createElement("div");
        holder.innerHTML = html;
        var fresh = holder.querySelector("#pending");
        var current = document.getElementById("pending");
        if (!fresh || !current || fresh.dataset.ids === current.dataset.ids) return;
        var active = document.activeElement;
        if (active && active.name === "reason" && active.value) return;
        current.replaceWith(fresh);
      })
      .catch(function () {});
  }
  setInterval(refresh, 1000);
})();
