//! Settings an optional capability keeps per agent, found by their type: the capability's
//! module defines the type, sets it from its builder method and reads it back, so the
//! agent's definition names no capability (and a build without it carries nothing).

use std::any::Any;
use std::rc::Rc;

/// An agent's capability settings, at most one of each type.
#[derive(Clone, Default)]
pub(crate) struct Settings(Vec<Rc<dyn Any>>);

#[allow(
    dead_code,
    reason = "used by the capabilities a build has (schedules' busy policy)"
)]
impl Settings {
    /// Sets the setting of type `T` (replacing the one there was).
    pub(crate) fn set<T: Any>(&mut self, value: T) {
        self.0.retain(|s| !s.is::<T>());
        self.0.push(Rc::new(value));
    }

    /// The setting of type `T`, if one was set.
    pub(crate) fn get<T: Any>(&self) -> Option<&T> {
        self.0.iter().find_map(|s| s.downcast_ref::<T>())
    }
}

#[cfg(test)]
mod tests {
    use super::Settings;

    #[test]
    fn a_setting_is_found_by_its_type_and_a_second_replaces_the_first() {
        let mut settings = Settings::default();
        assert_eq!(settings.get::<u8>(), None);
        settings.set(1u8);
        settings.set("other");
        settings.set(2u8);
        assert_eq!(settings.get::<u8>(), Some(&2));
        assert_eq!(settings.get::<&str>(), Some(&"other"));
        assert_eq!(settings.get::<u16>(), None);
    }
}
