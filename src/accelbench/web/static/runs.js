/* Runs list: cancel/delete buttons, and a refresh while any listed run is in flight. */
"use strict";
(function () {
  accelbench.bindRunActions(document.getElementById("action-error"));
  const live = document.querySelector('#runs tr[data-status="pending"], #runs tr[data-status="deploying"], #runs tr[data-status="benchmarking"]');
  if (live) setTimeout(function () { location.reload(); }, 5000);
})();
