//! A policy built against `shellward:policy@1.0.0`, a stand-in for a future incompatible contract. The host must
//! refuse it with an error naming both versions. Not for use.

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({ path: "wit", world: "policy-world" });

    struct Future;

    impl exports::shellward::policy::policy::Guest for Future {
        fn evaluate(command: String) -> String {
            command
        }
    }

    export!(Future);
}
