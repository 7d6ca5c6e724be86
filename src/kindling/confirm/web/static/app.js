// The approvers' page. It never moves what is under the pointer:
// - it polls /ui/pending for the ids of pending requests only (204 when nothing changed);
// - a request that appears is announced in a fixed banner, and shown when the approver clicks it;
// - a request that expires or is decided elsewhere is greyed out where it stands, its buttons off;
// - a card's buttons work only after it has stood still on screen for data-min-view-ms (the
//   server checks the same from the card's signed render time).
(function () {
  "use strict";
  // A sign-in link (/ui/login#token=...) signs in: the fragment never reaches the server or its logs,
  // and it leaves the address bar at once. A browser already signed in is not switched to another
  // account by a link: the token is filled in and the approver chooses.
  var token = document.getElementById("token");
  if (token && location.hash.indexOf("#token=") === 0) {
    var value = "";
    try { value = decodeURIComponent(location.hash.slice(7)).trim(); } catch (e) { value = ""; }
    history.replaceState(null, "", location.pathname);
    token.value = value;
    var login = document.getElementById("login");
    if (value && login && !login.hasAttribute("data-signed-in")) login.submit();
  }
  var section = document.getElementById("pending");
  if (!section) return;
  var minView = parseInt(section.dataset.minViewMs || "1000", 10);
  var version = section.dataset.version || "";
  var shown = (section.dataset.ids || "").split(",").filter(Boolean);
  var serverIds = shown.slice();
  var banner = document.getElementById("changes");
  var bannerText = document.getElementById("changes-text");

  function cards() { return Array.prototype.slice.call(document.querySelectorAll("#cards .request")); }

  // Buttons of every card off, then on once the layout has stood still for minView ms.
  var armTimer = null;
  function arm() {
    cards().forEach(function (card) {
      card.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    });
    if (armTimer) clearTimeout(armTimer);
    armTimer = setTimeout(function () {
      cards().forEach(function (card) {
        if (card.classList.contains("gone")) return;
        card.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
        card.classList.add("ready");
      });
    }, minView);
  }

  function markGone(card) {
    if (card.classList.contains("gone")) return;
    card.classList.add("gone");
    card.classList.remove("ready");
    card.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    card.querySelector(".card-status").textContent =
      "No longer pending (expired or decided elsewhere): nothing here can be decided.";
  }

  function showBanner() {
    var added = serverIds.filter(function (id) { return shown.indexOf(id) < 0; }).length;
    var gone = shown.filter(function (id) { return serverIds.indexOf(id) < 0; }).length;
    if (!added && !gone) { banner.hidden = true; return; }
    var parts = [];
    if (added) parts.push(added + " new request" + (added > 1 ? "s" : ""));
    if (gone) parts.push(gone + " no longer pending");
    bannerText.textContent = parts.join(", ") + ".";
    banner.hidden = false;
  }

  function poll() {
    fetch("/ui/pending?known=" + encodeURIComponent(version), { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.status === 200 ? r.json() : null; })
      .then(function (data) {
        if (!data) return;
        version = data.version;
        serverIds = data.ids;
        cards().forEach(function (card) {
          if (serverIds.indexOf(card.dataset.id) < 0) markGone(card);
        });
        showBanner();
      })
      .catch(function () {});
  }

  // Applied only when the approver asks: gone cards leave, new ones are added at the end, and every
  // card's buttons wait minView again, since cards may have moved.
  document.getElementById("apply-changes").addEventListener("click", function () {
    var added = serverIds.filter(function (id) { return shown.indexOf(id) < 0; });
    var load = added.length
      ? fetch("/ui/cards?ids=" + encodeURIComponent(added.slice(0, 50).join(",")),
              { credentials: "same-origin", cache: "no-store" }).then(function (r) { return r.ok ? r.text() : ""; })
      : Promise.resolve("");
    load.then(function (html) {
      cards().forEach(function (card) { if (card.classList.contains("gone")) card.remove(); });
      var holder = document.createElement("div");
      holder.innerHTML = html;
      var box = document.getElementById("cards");
      Array.prototype.slice.call(holder.querySelectorAll(".request")).forEach(function (card) {
        if (!document.getElementById(card.id)) box.appendChild(card);
      });
      shown = cards().map(function (c) { return c.dataset.id; });
      section.querySelector(".count").textContent = "(" + shown.length + ")";
      section.querySelector(".empty").hidden = shown.length > 0;
      arm();
      showBanner();
    }).catch(function () {});
  });

  // A click that lands on a card that is gone or not yet steady decides nothing.
  document.addEventListener("submit", function (event) {
    var card = event.target.closest && event.target.closest(".request");
    if (card && (card.classList.contains("gone") || !card.classList.contains("ready"))) event.preventDefault();
  }, true);

  arm();
  setInterval(poll, 1000);
})();
