(function(){
  var box=document.getElementById('filters'); if(!box) return;
  box.hidden=false;
  var text=document.getElementById('f-text'), axis=document.getElementById('f-axis'),
      status=document.getElementById('f-status'), count=document.getElementById('f-count');
  var rows=Array.prototype.slice.call(document.querySelectorAll('details.traj'));
  function apply(){
    var q=text.value.trim().toLowerCase(), a=axis.value, s=status.value, n=0;
    var want=s ? a+':'+s : (a==='*' ? '' : a+':any');
    rows.forEach(function(r){
      var hay=r.getAttribute('data-search')+' '+(q && r.textContent.toLowerCase());
      var ok=(!q || hay.indexOf(q)>=0) &&
             (!want || (' '+r.getAttribute('data-states')+' ').indexOf(' '+want+' ')>=0);
      r.hidden=!ok; if(ok) n++;
    });
    count.textContent=n+' of '+rows.length+' shown';
  }
  text.addEventListener('input',apply); axis.addEventListener('change',apply); status.addEventListener('change',apply);
  document.addEventListener('click',function(ev){
    var link=ev.target.closest && ev.target.closest('a[data-open]'); if(!link) return;
    var target=document.getElementById(link.getAttribute('href').slice(1));
    if(target){ target.hidden=false; target.open=true; }
  });
  apply();
})();
