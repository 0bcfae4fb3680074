"""Loopback stand-ins for the hosted models: JevServer (jev.py) and FlashServer (flash.py)."""
