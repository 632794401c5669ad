//! [`AgentLoopBuilder`]: the one way to make an [`AgentLoop`], and the faults [`build`] reports
//! together ([decision 151](crate::manual::decisions#decision-151)).
//!
//! The route supplies the provider and the model, so a loop cannot log one model's header and
//! send by another's rules; tools and options are checked against the route with the checks
//! the wire applies, before anything is logged. Every fault is reported at once (as reqwest's
//! `ClientBuilder` and http's builders do), so a caller fixes them in one pass.
//!
//! [`build`]: AgentLoopBuilder::build

use std::borrow::Borrow;
use std::fmt;

use indexmap::IndexMap;
use serde_json::Value;

use super::{AgentLoop, Attributor, Recorder, ToolOrder, last_header, last_position, prompt};
use crate::event::Config;
use crate::meter::Meter;
use crate::route::{ANY_MODEL, OPENAI_COMPATIBLE, Price, Route, ToolRefused, undated};
use crate::session::Session;
use crate::vocab::ToolSchema;
use crate::wire::{WireError, option_refusal};

/// Builds an [`AgentLoop`] over one session and one route: [`AgentLoop::builder`].
///
/// Every setter takes the builder and returns it; [`build`](Self::build) checks everything
/// at once. What is not set comes from the route (provider, model) or, on a session that
/// already holds requests, from the log (system prompt, tools; see [`build`](Self::build)).
///
/// ```
/// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
/// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
///     .option("max_tokens", 64.into())
///     .system_prompt("Be brief.")
///     .tools([ToolSchema::no_input("read", "Read a file")])
///     .build()?;
/// assert_eq!((agent.config().provider.as_str(), agent.config().model.as_str()), ("deepseek", "deepseek-flash"));
/// agent.user_turn([Message::user("u1", "hi")])?;
/// # Ok::<(), mektpoy::Error>(())
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct AgentLoopBuilder<S: Borrow<Session> = Session> {
    session: S,
    route: Route,
    provider: Option<String>,
    model: Option<String>,
    options: IndexMap<String, Value>,
    system_prompt: Option<String>,
    tools: Option<Vec<ToolSchema>>,
    ids: Option<Box<dyn FnMut() -> String + Send>>,
    tool_order: ToolOrder,
    price: Option<Price>,
    meter: Option<Meter>,
}

impl<S: Borrow<Session>> fmt::Debug for AgentLoopBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentLoopBuilder")
            .field("session", &self.session.borrow().id())
            .field("route", &(&self.route.provider, &self.route.model))
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("options", &self.options)
            .field("tool_order", &self.tool_order)
            .finish_non_exhaustive()
    }
}

/// Building a loop.
///
/// ```
/// use mektpoy::{AgentLoop, Session, route_for};
/// let agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash")).build()?;
/// assert_eq!(agent.config().model, "deepseek-flash");
/// # Ok::<(), mektpoy::agent::BuildError>(())
/// ```
impl<S: Borrow<Session>> AgentLoop<S> {
    /// A builder for a loop over `session` sending to `route`: the route supplies the
    /// provider and the model (a generic route, model `*`, asks for [`model`](AgentLoopBuilder::model)).
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("anthropic", "claude-opus-5"))
    ///     .build()?;
    /// assert_eq!(agent.config().model, "claude-opus-5");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn builder(session: S, route: Route) -> AgentLoopBuilder<S> {
        AgentLoopBuilder {
            session,
            route,
            provider: None,
            model: None,
            options: IndexMap::new(),
            system_prompt: None,
            tools: None,
            ids: None,
            tool_order: ToolOrder::AsGiven,
            price: None,
            meter: None,
        }
    }
}

impl<S: Borrow<Session>> AgentLoopBuilder<S> {
    /// The model id to send. Required on a generic route (model `*`); on a concrete route it
    /// must be the route's model (or, on Anthropic, a dated snapshot of it, as
    /// [`route_for`](crate::route_for) resolves one).
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let generic = route_for("openai-compatible", "acme-1");
    /// assert_eq!(generic.model, "*");
    /// let agent = AgentLoop::builder(Session::new("s"), generic).model("acme-1").build()?;
    /// assert_eq!(agent.config().model, "acme-1");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The provider id to log. Only the generic OpenAI-compatible chat route (which stands for
    /// any provider speaking that API) takes another provider than its own; any other route
    /// refuses one ([`BuildFault::ProviderMismatch`]).
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let route = route_for("acme", "acme-1"); // the generic OpenAI-compatible route
    /// let agent = AgentLoop::builder(Session::new("s"), route)
    ///     .provider("acme")
    ///     .model("acme-1")
    ///     .build()?;
    /// assert_eq!(agent.config().provider, "acme");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// Provider, model and options at once, as a header logs them (a configuration read back
    /// from a log, or a proxy's client request): checked as [`provider`](Self::provider),
    /// [`model`](Self::model) and [`options`](Self::options) are. Replaces the options set
    /// before.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Config, Session, route_for};
    /// let config = Config::new("deepseek", "deepseek-flash").with("max_tokens", 64.into()).unwrap();
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let agent = AgentLoop::builder(Session::new("s"), route).config(config.clone()).build()?;
    /// assert_eq!(agent.config(), &config);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn config(mut self, config: Config) -> Self {
        self.provider = Some(config.provider);
        self.model = Some(config.model);
        self.options = config.extra;
        self
    }

    /// One request option (`max_tokens`, `temperature`, ...), after those set before.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .option("max_tokens", 64.into())
    ///     .build()?;
    /// assert_eq!(agent.config().extra()["max_tokens"], 64);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn option(mut self, key: impl Into<String>, value: Value) -> Self {
        self.options.insert(key.into(), value);
        self
    }

    /// Request options, after those set before; checked at [`build`](Self::build) with the
    /// serializer's own rules ([`BuildFault::Option`]).
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let options = [("max_tokens".to_owned(), 64.into()), ("temperature".to_owned(), 0.into())];
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .options(options)
    ///     .build()?;
    /// assert_eq!(agent.config().extra().len(), 2);
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn options(mut self, options: impl IntoIterator<Item = (String, Value)>) -> Self {
        self.options.extend(options);
        self
    }

    /// The rendered system prompt (default: the latest one on the session's surface).
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .system_prompt("Be brief.")
    ///     .build()?;
    /// assert_eq!(agent.system_prompt(), "Be brief.");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// The effective tools, in the order they are declared (default: those of the log's last
    /// request for this provider and model). Checked at [`build`](Self::build) as
    /// [`AgentLoop::set_tools`] checks them; each refused tool is one [`BuildFault::Tool`].
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, ToolSchema, route_for};
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .tools([ToolSchema::no_input("read", "Read a file")])
    ///     .build()?;
    /// assert_eq!(agent.tools()[0].name(), "read");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn tools(mut self, tools: impl IntoIterator<Item = ToolSchema>) -> Self {
        self.tools = Some(tools.into_iter().collect());
        self
    }

    /// Draws the ids of the messages the loop writes (system nodes, developer messages) from
    /// `ids`; see [`Recorder::with_ids`] for what `ids` must not do.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, route_for};
    /// let mut n = 0;
    /// let mut agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .system_prompt("Be brief.")
    ///     .ids(move || { n += 1; format!("id-{n}") })
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// assert_eq!(agent.session().messages().first().unwrap().id(), "id-1");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn ids(mut self, ids: impl FnMut() -> String + Send + 'static) -> Self {
        self.ids = Some(Box::new(ids));
        self
    }

    /// Logs the effective tools in `order` (default [`ToolOrder::AsGiven`]);
    /// [`ToolOrder::FirstSeen`] keeps a reordered tool list from rewriting the cached prefix.
    /// See [`Recorder::with_tool_order`].
    ///
    /// ```
    /// use mektpoy::agent::ToolOrder;
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let agent = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .tool_order(ToolOrder::FirstSeen)
    ///     .build()?;
    /// # let _ = agent;
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn tool_order(mut self, order: ToolOrder) -> Self {
        self.tool_order = order;
        self
    }

    /// Prices the meter with `price` instead of the route's catalog price.
    ///
    /// ```
    /// use mektpoy::route::{Evidence, Price};
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// // The catalog has no price for this model; the caller's contract has one.
    /// let route = route_for("deepseek", "deepseek-flash");
    /// assert!(route.price().is_none());
    /// let price = Price::usd(0.5, 0.05, Evidence::None);
    /// let agent = AgentLoop::builder(Session::new("s"), route).price(price).build()?;
    /// # let _ = agent;
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }

    /// Counts on from `meter`: a meter a previous process saved ([`Meter::save`]) and this one
    /// restored ([`Meter::restore`]) for the same route, so that a resumed loop's next row
    /// compares with the request the dead process sent. Priced with [`price`](Self::price),
    /// else with the route's catalog price (the saved form holds no price).
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Meter, Session, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let agent = AgentLoop::builder(Session::new("s"), route.clone())
    ///     .meter(Meter::new(&route))
    ///     .build()?;
    /// assert!(agent.meter().rows().is_empty());
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    pub fn meter(mut self, meter: Meter) -> Self {
        self.meter = Some(meter);
        self
    }

    /// The configuration the loop would log: the route's provider and model unless set, and
    /// the options.
    fn resolved_config(&self) -> Config {
        let provider = self
            .provider
            .clone()
            .unwrap_or_else(|| self.route.provider.to_string());
        let model = match (&self.model, self.route.model == ANY_MODEL) {
            (Some(model), _) => model.clone(),
            (None, false) => self.route.model.to_string(),
            (None, true) => String::new(),
        };
        Config {
            provider,
            model,
            extra: self.options.clone(),
        }
    }

    /// Every fault of this builder, in a fixed order (provider, model, options, tools).
    fn faults(&self, config: &Config, tools: &[ToolSchema]) -> Vec<BuildFault> {
        let route = &self.route;
        let mut faults = Vec::new();
        let any_provider = route.provider == OPENAI_COMPATIBLE && route.model == ANY_MODEL;
        if config.provider != route.provider && !any_provider {
            faults.push(BuildFault::ProviderMismatch {
                route: route.provider.to_string(),
                provider: config.provider.clone(),
            });
        }
        if route.model == ANY_MODEL {
            if config.model.is_empty() {
                faults.push(BuildFault::ModelRequired {
                    provider: route.provider.to_string(),
                });
            }
        } else if config.model != route.model
            && !(route.provider == "anthropic" && undated(&config.model) == Some(&route.model))
        {
            faults.push(BuildFault::ModelMismatch {
                route: route.model.to_string(),
                model: config.model.clone(),
            });
        }
        if let Some(refusal) = option_refusal(config, route) {
            faults.push(BuildFault::Option(refusal));
        }
        faults.extend(route.tool_refusals(tools).map(BuildFault::Tool));
        faults
    }

    /// The loop, or every fault at once.
    ///
    /// On a new session the loop has no system prompt and no tools unless set. On a session
    /// that already holds requests (a reopened file), it continues where the log ends: the
    /// position from the last turn and step its messages carry, so the next
    /// [`user_turn`](AgentLoop::user_turn) is the turn after it and
    /// [`retry`](AgentLoop::retry) resends the step the log ends in; unless set, the effective
    /// tools of the log's last request for this provider and model (another model's, when the
    /// log has none; another loop may share the log) and the latest system prompt on the
    /// surface. So a retry after a restart resends the same request, and a loop that sets
    /// nothing logs no change it did not make.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Message, Session, ToolSchema, route_for};
    /// let route = route_for("deepseek", "deepseek-flash");
    /// let mut agent = AgentLoop::builder(Session::new("s"), route.clone())
    ///     .system_prompt("Be brief.")
    ///     .tools([ToolSchema::no_input("read", "Read a file")])
    ///     .build()?;
    /// agent.user_turn([Message::user("u1", "hi")])?;
    /// // The process dies; the log is reopened.
    /// let reopened = AgentLoop::builder(agent.into_session(), route).build()?;
    /// assert_eq!(reopened.tools()[0].name(), "read");
    /// assert_eq!(reopened.system_prompt(), "Be brief.");
    /// # Ok::<(), mektpoy::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`BuildError`] holding every [`BuildFault`]: a provider or model the route does not
    /// send, an option the route's serializer refuses, each tool the route refuses (given, or
    /// restored from the log). The session is dropped with the builder; a caller that must
    /// keep an owned session calls [`check`](Self::check) first.
    pub fn build(self) -> Result<AgentLoop<S>, BuildError> {
        let (config, tools) = self.plan()?;
        let s = self.session.borrow();
        let mut recorder = Recorder::attach(s);
        recorder.set_tool_order(self.tool_order);
        if let Some(ids) = self.ids {
            recorder = recorder.with_ids(ids);
        }
        let (turn, step) = last_position(s);
        let system_prompt = self.system_prompt.unwrap_or_else(|| {
            prompt::PromptNodes::default()
                .extended(&s.surface().0)
                .latest
                .map(|(_, m)| m.text())
                .unwrap_or_default()
        });
        // Decision 105: a generic entry meters by the cache facts of the model it sends.
        let meter = self
            .meter
            .unwrap_or_else(|| Meter::new(&self.route.metered_for(&config.model)));
        let meter = match self.price.or_else(|| self.route.price().cloned()) {
            Some(price) => meter.with_price(price),
            None => meter,
        };
        Ok(AgentLoop {
            session: self.session,
            recorder,
            route: self.route,
            config,
            system_prompt,
            tools,
            turn,
            step,
            attempt: 0,
            new_series: false,
            meter,
            attributor: Attributor::new(),
            last_recorded: None,
        })
    }

    /// What [`build`](Self::build) would report, without consuming the builder (so without
    /// dropping an owned session).
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let builder = AgentLoop::builder(Session::new("s"), route_for("openai", "gpt-5.4"))
    ///     .model("gpt-4o");
    /// assert!(builder.check().is_err());
    /// ```
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub fn check(&self) -> Result<(), BuildError> {
        self.plan().map(drop)
    }

    /// The configuration and tools the loop would start with (the given tools, else those
    /// of the log's last request for this provider and model), or every fault.
    fn plan(&self) -> Result<(Config, Vec<ToolSchema>), BuildError> {
        let config = self.resolved_config();
        let tools = match &self.tools {
            Some(tools) => tools.clone(),
            None => last_header(self.session.borrow(), &config)
                .map(|h| h.header.tools.to_vec())
                .unwrap_or_default(),
        };
        let faults = self.faults(&config, &tools);
        if faults.is_empty() {
            Ok((config, tools))
        } else {
            Err(BuildError { faults })
        }
    }
}

/// One reason [`AgentLoopBuilder::build`] refused, or [`AgentLoop::set_options`] refused.
///
/// ```
/// use mektpoy::agent::BuildFault;
/// use mektpoy::{AgentLoop, Session, route_for};
/// let err = AgentLoop::builder(Session::new("s"), route_for("openai", "gpt-9-unknown")).build().unwrap_err();
/// let [BuildFault::ModelRequired { provider }] = err.faults() else { panic!("{err}") };
/// assert_eq!(provider, "openai");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildFault {
    /// The route is a generic entry (model `*`) and no model was given: the body would name
    /// no model.
    ModelRequired {
        /// The route's provider.
        provider: String,
    },
    /// The route is one model's and another model was given: the body would follow the
    /// route's model's rules and name another.
    ModelMismatch {
        /// The route's model.
        route: String,
        /// The model given.
        model: String,
    },
    /// Another provider than the route's was given: the log would record a header of a
    /// provider the requests never reach.
    ProviderMismatch {
        /// The route's provider.
        route: String,
        /// The provider given.
        provider: String,
    },
    /// The route's serializer refuses the options (a key it writes itself, two names for one
    /// limit, a forced `tool_choice` the model refuses): every request would be refused.
    Option(WireError),
    /// The route refuses a tool (a name or schema its provider refuses, the reserved
    /// placeholder name, a repeated name), as [`AgentLoop::set_tools`] does.
    Tool(ToolRefused),
}

impl fmt::Display for BuildFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildFault::ModelRequired { provider } => write!(
                f,
                "the route is {provider}'s generic entry: it needs a model to send"
            ),
            BuildFault::ModelMismatch { route, model } => {
                write!(f, "the route sends {route}, not {model}")
            }
            BuildFault::ProviderMismatch { route, provider } => {
                write!(f, "the route is {route}'s, not {provider}'s")
            }
            BuildFault::Option(e) => write!(f, "options: {e}"),
            BuildFault::Tool(e) => e.fmt(f),
        }
    }
}

/// Every fault that kept [`AgentLoopBuilder::build`] from building, or
/// [`AgentLoop::set_options`] from setting (at least one).
///
/// ```
/// use mektpoy::agent::BuildFault;
/// use mektpoy::{AgentLoop, Session, ToolSchema, route_for};
/// let err = AgentLoop::builder(Session::new("s"), route_for("anthropic", "claude-opus-5"))
///     .model("deepseek-flash")
///     .tools([ToolSchema::no_input("github.search", "")])
///     .build()
///     .unwrap_err();
/// assert!(matches!(err.faults(), [BuildFault::ModelMismatch { .. }, BuildFault::Tool(_)]));
/// ```
#[derive(Debug)]
pub struct BuildError {
    faults: Vec<BuildFault>,
}

impl BuildError {
    /// The faults, in a fixed order: provider, model, options, then tools in their order.
    ///
    /// ```
    /// use mektpoy::agent::BuildFault;
    /// use mektpoy::{AgentLoop, Session, route_for};
    /// let err = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .provider("anthropic")
    ///     .model("claude-opus-5")
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err.faults(), [BuildFault::ProviderMismatch { .. }, BuildFault::ModelMismatch { .. }]));
    /// ```
    pub fn faults(&self) -> &[BuildFault] {
        &self.faults
    }

    /// The faults, owned.
    ///
    /// ```
    /// use mektpoy::{AgentLoop, Session, ToolSchema, route_for};
    /// let tools = [ToolSchema::no_input("a.b", ""), ToolSchema::no_input("c.d", "")];
    /// let err = AgentLoop::builder(Session::new("s"), route_for("deepseek", "deepseek-flash"))
    ///     .tools(tools)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.into_faults().len(), 2);
    /// ```
    pub fn into_faults(self) -> Vec<BuildFault> {
        self.faults
    }

    /// One option fault.
    pub(super) fn option(refusal: WireError) -> Self {
        BuildError {
            faults: vec![BuildFault::Option(refusal)],
        }
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.faults.as_slice() {
            [one] => write!(f, "the loop cannot be built: {one}"),
            faults => {
                write!(f, "the loop cannot be built ({} faults)", faults.len())?;
                for (i, fault) in faults.iter().enumerate() {
                    write!(f, "{} {fault}", if i == 0 { ':' } else { ';' })?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for BuildError {}
