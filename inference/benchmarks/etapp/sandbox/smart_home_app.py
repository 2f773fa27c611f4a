"""Smart home (spec section 1.7): lights, curtains, bathtub, kettle and thermostat. Nothing they
set can be read back, so they keep no state. The thermostat reads New York's hourly weather
whatever the user's city, as upstream."""

from __future__ import annotations

from datetime import datetime

from inference.benchmarks.etapp.sandbox.core import TIME_FORMAT, Env, Failed

LOCATIONS = ("residence", "kitchen", "dining room", "living room", "bedroom", "bathroom")
COLORS = ("yellow", "white", "white-yellow")
THERMOSTAT_CITY = "New York"
HOUR_FORMAT = "%Y-%m-%d %H:%M"


def _success(message):
    return {"status": "success", "message": message}


class Light:
    """Upstream's Light class: same method and parameter names, so Python words the errors."""

    TOOLS = ("control_light_in_home",)

    def __init__(self, env: Env) -> None:
        self._env = env

    def control_light_in_home(self, action, location, brightness=1, color="white"):
        if action not in ("on", "off"):
            raise ValueError("The action must be 'on' or 'off'.")
        if not location:
            raise ValueError("Location must be specified.")
        location = location.lower()
        if location not in LOCATIONS:
            raise ValueError(f"Invalid location. Supported locations are: {', '.join(LOCATIONS)}.")
        if action == "off":
            return _success(f"Light in {location} is now OFF.")
        if brightness is None or color is None:
            raise ValueError("Both brightness and color must be provided when turning the light on.")
        # A membership test, as upstream: 2.0 (and True) pass, the string "2" does not.
        if brightness not in (1, 2, 3):
            raise ValueError("Brightness level must be 1 (low), 2 (medium), or 3 (high).")
        if color not in COLORS:
            raise ValueError("Color must be 'yellow', 'white' or 'white-yellow'.")
        return _success(f"Light in {location} is now ON with brightness {brightness} and color {color}.")


class SmartAppliance:
    """Upstream's SmartAppliance class: same method and parameter names, so Python words the errors."""

    TOOLS = ("control_curtains_in_home", "control_bathtub_in_home", "boil_water_in_home")

    def __init__(self, env: Env) -> None:
        self._env = env

    def control_curtains_in_home(self, open):  # noqa: A002 -- upstream's parameter name
        # Upstream capitalises first, so any non-string fails there with Python's message, and then
        # validates the value as given, so "true" fails although its capitalised form would pass.
        open.capitalize()
        if open not in ("True", "False"):
            raise ValueError("The open must be 'True' or 'False'.")
        return _success("Curtains opened." if open == "True" else "Curtains closed.")

    def control_bathtub_in_home(self, fill, water_level=None, temperature=None, keep_temperature="False"):
        # One flag at a time, as upstream: `fill` is normalised and checked before `keep_temperature`
        # is touched, so a bad fill is reported even when keep_temperature is no string.
        fill = fill.capitalize()
        if fill not in ("True", "False"):
            raise ValueError("The fill must be 'True' or 'False'.")
        keep_temperature = keep_temperature.capitalize()
        if keep_temperature not in ("True", "False"):
            raise ValueError("The keep_temperature must be 'True' or 'False'.")
        filling = fill == "True"
        return _success({"operation": "fill up the bathtub" if filling else "drain the bathtub",
                         "temperature": temperature if filling else None, "water_level": water_level})

    def boil_water_in_home(self, temperature, keep_temperature="False"):
        if temperature > 100:
            return {"status": "failure", "message": "Error: Temperature exceeds boiling point of water."}
        keep = keep_temperature.capitalize()
        if keep not in ("True", "False"):  # upstream's second check (spec correction 7), raised
            raise ValueError("The keep_temperature must be 'True' or 'False'.")
        if keep == "True":
            return _success(f"Water is boiling at {temperature}°C, and will maintain this temperature.")
        return _success(f"Water has boiled at {temperature}°C.")


class Thermostat:
    """Upstream's Thermostat class: same method and parameter names, so Python words the errors."""

    TOOLS = ("set_temperature_and_humidity_in_home", "get_home_temperature_and_humidity")

    def __init__(self, env: Env) -> None:
        self._weather = env.data.weather

    def set_temperature_and_humidity_in_home(self, temperature=None, humidity=None):
        # Only temperature-without-humidity has its own message; every other call, even humidity
        # alone, falls through to the combined one (which can read "None°C"), as upstream.
        if temperature is not None and humidity is None:
            return _success(f"Current temperature set to {temperature}°C.")
        return _success(f"Current temperature set to {temperature}°C and current humidity set to {humidity}%.")

    def get_home_temperature_and_humidity(self, at_time):
        try:
            moment = datetime.strptime(at_time, TIME_FORMAT)
        except Exception as exc:  # noqa: BLE001 - upstream catches every failure of the time (correction 8)
            # Upstream's helper returns an error dict, which then fills both slots of the sentence.
            error = {"status": "error", "message": f"the at_time format not right: {exc}"}
            return Failed(_success(f"Current Temperature: {error}°C, Current Humidity: {error}%."))
        # The day is looked up by the text before the space, as written: an unpadded date is a KeyError.
        day = self._weather[THERMOSTAT_CITY][at_time.split(" ")[0]]
        last = None
        for hour in day["forecast"]["forecastday"][0]["hour"]:
            if datetime.strptime(hour["time"], HOUR_FORMAT) < moment:
                last = hour
        # At or before 00:00 nothing precedes: "'NoneType' object is not subscriptable", as upstream.
        temperature, humidity = last["temp_c"] + 2, last["humidity"] + 3
        return _success(f"Current Temperature: {temperature}°C, Current Humidity: {humidity}%.")
