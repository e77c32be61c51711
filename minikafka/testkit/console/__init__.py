"""The live console: minikafka's own state as a page in a browser, served by the admin endpoint.

* :mod:`.views` reads the broker into the JSON the endpoint answers (``GET /partitions``,
  ``GET /groups``) and the snapshot the page renders (the same bodies, side by side).
* :mod:`.feed` pushes that snapshot to subscribed pages as server-sent events (``GET /events``),
  built at most every ``interval`` seconds and only while a page is subscribed.
* ``static/`` holds the page itself: plain HTML, CSS and JavaScript, shipped as package data, with
  nothing fetched from anywhere but the admin endpoint (it works without internet).
"""
