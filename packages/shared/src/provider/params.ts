import type { TaskSpec } from "../schemas/task-types.ts";

/** Form fields of `in.php` for a task (without key/json/soft_id), as the 2Captcha v1 protocol names them. */
export function toProviderParams(task: TaskSpec): Record<string, string> {
  const out: Record<string, string> = {};
  const set = (k: string, v: string | number | boolean | undefined) => {
    if (v === undefined || v === false) return;
    out[k] = v === true ? "1" : String(v);
  };
  switch (task.type) {
    case "recaptcha_v2": {
      const p = task.params;
      set("method", "userrecaptcha");
      set("googlekey", p.sitekey);
      set("pageurl", p.pageurl);
      set("invisible", p.invisible);
      set("enterprise", p.enterprise);
      set("data-s", p.data_s);
      break;
    }
    case "recaptcha_v3": {
      const p = task.params;
      set("method", "userrecaptcha");
      set("version", "v3");
      set("googlekey", p.sitekey);
      set("pageurl", p.pageurl);
      set("action", p.action);
      set("min_score", p.min_score);
      set("enterprise", p.enterprise);
      break;
    }
    case "turnstile": {
      const p = task.params;
      set("method", "turnstile");
      set("sitekey", p.sitekey);
      set("pageurl", p.pageurl);
      set("action", p.action);
      set("data", p.cdata);
      break;
    }
    case "geetest": {
      const p = task.params;
      set("method", "geetest");
      set("gt", p.gt);
      set("challenge", p.challenge);
      set("pageurl", p.pageurl);
      set("api_server", p.api_server);
      break;
    }
    case "image": {
      const p = task.params;
      set("method", "base64");
      set("body", p.body);
      set("phrase", p.phrase);
      set("regsense", p.case_sensitive);
      set("numeric", p.numeric);
      set("calc", p.calc);
      set("min_len", p.min_len);
      set("max_len", p.max_len);
      set("language", p.language);
      set("lang", p.lang);
      set("textinstructions", p.textinstructions);
      break;
    }
  }
  return out;
}
