"""Walk-through E: the Cost page's table of prices heads its last column with what it holds,
the money the flavor's healthy capacity costs per hour (price times healthy capacity: 2.50
x 15 GPUs = 37.50), as the four-lines table heads its "Cost of capacity". It read "The
flavor's capacity per hour", a capacity, over a column of money beside a column of GPUs."""

from __future__ import annotations

import re
from typing import Any

from dashboard_pages import text


def test_the_prices_tables_last_column_is_named_as_the_money_it_holds(
    pool: Any, page_as: Any
) -> None:
    page = text(page_as("fin").get("/cost/"))
    prices = page.split('id="prices-title"', 1)[1].split("</thead>", 1)[0]
    heads = [re.sub(r"<[^>]+>", "", head) for head in re.findall(r"<th[^>]*>.*?</th>", prices)]
    assert heads == [
        "Flavor",
        "Sharing",
        "Price per GPU-hour",
        "Healthy capacity",
        "Cost of the healthy capacity per hour",
    ]
