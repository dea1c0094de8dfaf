"""The dashboard's building blocks. ``charts`` holds the figure builders, which the simulation
reports use today and the dashboard pages will share."""
