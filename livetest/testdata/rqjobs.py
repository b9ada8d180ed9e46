"""Jobs for rqdriver.py (TestRQThroughKills): importable by the RQ worker."""
import time


def square(x):
    time.sleep(0.05)
    return x * x
