"""The 35 ETAPP tools, in sorted-app order then each app's config order (a test checks this
against the toolkit configs)."""

from __future__ import annotations

TOOL_NAMES: tuple[str, ...] = (
    # Calendar
    "add_event_in_calendar", "view_today_events_in_calendar", "view_events_in_calendar_by_providing_time_range",
    "delete_event_in_calendar", "add_alarm", "view_today_alarms",
    # Email
    "send_email", "get_today_emails_until_now", "search_email_by_sender_and_receiver", "search_email_by_content",
    # Health_control
    "get_current_health_and_mood_status", "get_user_recent_workout_records", "get_recent_health_and_mood_summary",
    # Music_control
    "play_music", "get_music_list_in_favorites",
    # Navigation
    "find_accommodations", "find_attractions", "find_restaurants", "find_flight",
    # Shopping_manager
    "add_product_to_cart", "search_products_in_shopping_manager", "view_cart_in_shopping_manager",
    # Smart_home_devices
    "control_curtains_in_home", "control_bathtub_in_home", "boil_water_in_home", "control_light_in_home",
    "set_temperature_and_humidity_in_home", "get_home_temperature_and_humidity",
    # Toolsearcher
    "search_tools", "get_tool_doc",
    # Weather
    "get_today_weather", "get_future_weather",
    # Web_Browsing
    "search_news_by_category", "search_heat_news", "search_from_wikipedia",
)
