"""Soft blocks: a ``200 OK`` whose body is not the page asked for.

Sites and the CDNs in front of them answer a crawler they distrust with a page that looks like success to
anything that checks only the status: a bot challenge, a login wall, or nothing at all. The sandbox serves
the three kinds crawlers meet most:

- ``challenge``: a Cloudflare-style "Attention Required!" interstitial (its title, the "Sorry, you have been
  blocked" heading, a Ray ID), the page Cloudflare's WAF serves a blocked client;
- ``login``: a "Please log in" wall in the site's own chrome (header, breadcrumb), so the page looks like the
  site, carries no product and no listing, and its links resolve like the real page's;
- ``empty``: a 200 with ``Content-Length: 0``, what a misbehaving proxy or an overloaded origin returns.

Bodies are pure functions of the path and a ray id, so a soft block is as reproducible as every other fault.
"""

from __future__ import annotations

import hashlib

from book_assets.sandbox.faults import Action
from book_assets.sandbox.pages import render_login_wall


def ray_id(seed: int, path: str, n: int) -> str:
    """A Cloudflare-shaped Ray ID (16 hex digits), fixed by the request's ``(seed, path, n)``."""
    return hashlib.sha256(f"{seed}|{path}|{n}|ray".encode()).hexdigest()[:16]


def challenge_html(host: str, ray: str) -> str:
    return f"""<!DOCTYPE html>
<!--[if lt IE 7]> <html class="no-js ie6 oldie" lang="en-US"> <![endif]-->
<!--[if gt IE 8]><!--> <html class="no-js" lang="en-US"> <!--<![endif]-->
<head>
<title>Attention Required! | Cloudflare</title>
<meta charset="UTF-8" />
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8" />
<meta name="robots" content="noindex, nofollow" />
<meta name="viewport" content="width=device-width,initial-scale=1" />
<link rel="stylesheet" id="cf_styles-css" href="/cdn-cgi/styles/cf.errors.css" />
</head>
<body>
  <div id="cf-wrapper">
    <div id="cf-error-details" class="cf-error-details-wrapper">
      <div class="cf-wrapper cf-header cf-error-overview">
        <h1 data-translate="block_headline">Sorry, you have been blocked</h1>
        <h2 class="cf-subheadline"><span data-translate="unable_to_access">You are unable to access</span> {host}</h2>
      </div>
      <div class="cf-section cf-wrapper">
        <div class="cf-columns two">
          <div class="cf-column">
            <h2 data-translate="blocked_why_headline">Why have I been blocked?</h2>
            <p data-translate="blocked_why_detail">This website is using a security service to protect itself from online attacks. The action you just performed triggered the security solution.</p>
          </div>
          <div class="cf-column">
            <h2 data-translate="blocked_resolve_headline">What can I do to resolve this?</h2>
            <p data-translate="blocked_resolve_detail">You can email the site owner to let them know you were blocked.</p>
          </div>
        </div>
      </div>
      <div class="cf-error-footer cf-wrapper">
        <p>
          <span class="cf-footer-item">Cloudflare Ray ID: <strong class="font-semibold">{ray}</strong></span>
          <span class="cf-footer-separator">&bull;</span>
          <span class="cf-footer-item">Performance &amp; security by Cloudflare</span>
        </p>
      </div>
    </div>
  </div>
</body>
</html>
"""  # noqa: E501


def soft_block_body(action: Action, path: str, host: str, ray: str) -> bytes:
    """The body of a soft block (``Action.SOFT_BLOCK_*``) served for ``path``."""
    if action is Action.SOFT_BLOCK_CHALLENGE:
        return challenge_html(host, ray).encode("utf-8")
    if action is Action.SOFT_BLOCK_LOGIN:
        return render_login_wall(path).encode("utf-8")
    if action is Action.SOFT_BLOCK_EMPTY:
        return b""
    raise ValueError(f"{action} is not a soft block")
